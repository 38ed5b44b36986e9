"""Server errors in the user's language, in Chromium against a real server: a browser in
简体中文 sends a message over the length limit (a validation error), imports a lorebook whose
name is taken (409, with Replace offered) and saves an edit another tab overtook (409 stale
revision, with Reload offered); each refusal reads wholly in Chinese, worded from the answer's
code and parameters, with only the user's own names left as they are."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, BrowserContext, Page, expect

from ._pages import new_chat, stored_messages
from ._site import Site
from .conftest import screenshot

DESKTOP = {"width": 1280, "height": 720}
PHONE = {"width": 390, "height": 844}
_HANS: dict[str, str] = json.loads(
    (resources.files("tavernkit.server") / "web" / "i18n" / "zh-Hans.json").read_text("utf-8")
)


def zh(text: str, **values: Any) -> str:
    """``text`` as the zh-Hans UI shows it."""
    return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), _HANS[text])


def _chinese_page(browser: Browser, site: Site) -> tuple[BrowserContext, Page]:
    context = browser.new_context(base_url=site.url, locale="zh-CN", viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(10_000)
    return context, page


def _latin_words(text: str, *names: str) -> list[str]:
    """The words of Latin letters in ``text`` once the user's own ``names`` are taken out."""
    for name in names:
        text = text.replace(name, "")
    return re.findall(r"[A-Za-z]{2,}", text)


def test_a_validation_error_and_a_taken_name_read_in_chinese(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    context, page = _chinese_page(browser, site)
    try:
        chat = new_chat(site)
        page.goto(f"/#/chat/{chat}")
        expect(page.locator(".log .message").first).to_be_visible()
        before = len(stored_messages(site, chat))
        page.get_by_label(zh("Message"), exact=True).fill("浪" * 200_001)
        page.get_by_role("button", name=zh("Send"), exact=True).click()
        alert = page.get_by_role("alert").filter(has_text=zh("Message"))
        said = zh(
            "{field} can be at most {max_length} characters long.",
            field=zh("Message"),
            max_length=200000,
        )
        expect(alert).to_contain_text(said)
        assert _latin_words(alert.inner_text()) == []
        assert len(stored_messages(site, chat)) == before
        screenshot(page, "error-languages-validation-desktop")
        page.set_viewport_size(PHONE)
        screenshot(page, "error-languages-validation-phone")
        page.set_viewport_size(DESKTOP)

        # a lorebook named as one already stored, with other entries: 409, Replace offered
        world = {"entries": {"0": {"uid": 0, "key": ["tide"], "content": "The tide turns."}}}
        file = tmp_path / "Shoals.json"
        file.write_text(json.dumps(world))
        page.goto("/#/lorebooks")
        page.get_by_label(zh("Import lorebooks")).set_input_files(str(file))
        expect(page.locator("li.book")).to_have_count(1)
        world["entries"]["0"]["content"] = "The tide is out."
        file.write_text(json.dumps(world))
        page.get_by_label(zh("Import lorebooks")).set_input_files(str(file))
        alert = page.get_by_role("alert").filter(has_text="Shoals")
        taken = zh(
            "A {kind} named “{name}” exists already (and differs).",
            kind=zh("lorebook"),
            name="Shoals",
        )
        expect(alert).to_contain_text(taken)
        expect(alert.get_by_role("button", name=zh("Replace"))).to_be_visible()
        assert _latin_words(alert.inner_text(), "Shoals.json", "Shoals") == []
        screenshot(page, "error-languages-name-taken-desktop")
        page.set_viewport_size(PHONE)
        screenshot(page, "error-languages-name-taken-phone")
    finally:
        context.close()


def test_a_stale_edit_reads_in_chinese_and_offers_a_reload(browser: Browser, site: Site) -> None:
    chat = new_chat(site)
    first, page = _chinese_page(browser, site)
    second, other = _chinese_page(browser, site)
    try:
        for tab in (page, other):
            tab.goto(f"/#/chat/{chat}")
            expect(tab.locator(".log .message").first).to_be_visible()
            tab.get_by_role("button", name=zh("Edit message {number}", number=1)).click()
        other.get_by_role("textbox", name=zh("Edit message")).fill("另一个标签页的文字")
        other.get_by_role("button", name=zh("Save"), exact=True).click()
        expect(other.locator(".log .message").first).to_contain_text("另一个标签页的文字")

        page.get_by_role("textbox", name=zh("Edit message")).fill("我的文字")
        page.get_by_role("button", name=zh("Save"), exact=True).click()
        alert = page.get_by_role("alert")
        stale = zh(
            "Message #{index} was changed in another tab or device, so your edit was not saved. "
            "Reload to see the current text (copy yours first to keep it).",
            index=0,
        )
        expect(alert).to_contain_text(stale)
        expect(alert.get_by_role("button", name=zh("Reload message"))).to_be_visible()
        assert _latin_words(alert.inner_text()) == []
        assert stored_messages(site, chat)[0]["mes"] == "另一个标签页的文字"
        screenshot(page, "error-languages-stale-desktop")
        alert.get_by_role("button", name=zh("Reload message")).click()
        expect(page.locator(".log .message").first).to_contain_text("另一个标签页的文字")
    finally:
        first.close()
        second.close()
