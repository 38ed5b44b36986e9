"""What the browser tests do on a page, as a user would: open a chat, send, wait for a turn to
be shown to its end; and what they read back from the server's store."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from playwright.sync_api import Page, expect

from ._site import Site

__all__ = [
    "drop_files",
    "last_body",
    "new_chat",
    "open_chat",
    "send",
    "stored_messages",
    "turn",
]


def new_chat(site: Site) -> str:
    return site.call(site.tk.chats.new_chat("Mira")).id


def stored_messages(site: Site, chat: str) -> list[dict[str, Any]]:
    return [m.data for m in site.call(site.tk.chats.load(chat)).messages]


def open_chat(page: Page, chat: str) -> None:
    page.goto(f"/#/chat/{chat}")
    expect(page.locator(".log .message").first).to_be_visible()


def send(page: Page, text: str) -> None:
    page.get_by_label("Message", exact=True).fill(text)
    page.get_by_role("button", name="Send").click()


def turn(page: Page, action: Callable[[], object], timeout: float = 10_000) -> None:
    """Do ``action`` (which starts a turn) and wait until the turn has been shown to its end
    and the chat read again."""
    done = int(page.locator(".log").get_attribute("data-turns") or 0)
    action()
    expect(page.locator(".log")).to_have_attribute("data-turns", str(done + 1), timeout=timeout)
    expect(page.locator(".log .live")).to_have_count(0)


def last_body(page: Page) -> Any:
    return page.locator(".log .message").last.locator(".body")


def drop_files(page: Page, selector: str, files: dict[str, bytes]) -> None:
    """Dispatch a real drop event carrying ``files`` (a DataTransfer built in the page)."""
    payload = {name: base64.b64encode(data).decode() for name, data in files.items()}
    transfer = page.evaluate_handle(
        """(files) => {
            const dt = new DataTransfer();
            for (const [name, b64] of Object.entries(files)) {
                const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
                dt.items.add(new File([bytes], name, { type: "image/png" }));
            }
            return dt;
        }""",
        payload,
    )
    page.dispatch_event(selector, "dragenter", {"dataTransfer": transfer})
    page.dispatch_event(selector, "drop", {"dataTransfer": transfer})


@contextmanager
def sized_pages(browser: Any, site: Site, **options: Any) -> Iterator[Callable[..., Page]]:
    """``make(viewport)``: a fresh English page of that size (``options`` go to each new
    context, e.g. ``bypass_csp=True`` for ``page.evaluate``); every context is closed after."""
    contexts: list[Any] = []

    def make(viewport: dict[str, int]) -> Page:
        context = browser.new_context(
            base_url=site.url, locale="en-US", viewport=viewport, **options
        )
        contexts.append(context)
        page: Page = context.new_page()
        page.set_default_timeout(10_000)
        return page

    try:
        yield make
    finally:
        for context in contexts:
            context.close()
