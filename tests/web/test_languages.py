"""The UI in 简体中文 and 繁體中文: a browser whose language is Chinese gets the chat, the
characters and the settings in its script (found by role and translated name: accessible names
equal the visible text in every language), with <html lang> set and CJK glyphs drawn; the
Language switch in Settings changes it and is kept; the browser's English gets English."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from chat._server import Reply

from ._pages import new_chat, open_chat, turn
from ._site import Site
from .conftest import screenshot

I18N = resources.files("tavernkit.server") / "web" / "i18n"
DESKTOP = {"width": 1280, "height": 720}
PHONE = {"width": 390, "height": 844}


def _catalogue(language: str) -> dict[str, str]:
    loaded: dict[str, str] = json.loads((I18N / f"{language}.json").read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
def browser_in(browser: Any, site: Site) -> Iterator[Any]:
    """A page factory for a browser whose language is ``locale`` (navigator.languages)."""
    contexts: list[Any] = []

    def open_page(locale: str) -> Page:
        context = browser.new_context(base_url=site.url, locale=locale, viewport=DESKTOP)
        contexts.append(context)
        page: Page = context.new_page()
        page.set_default_timeout(10_000)
        return page

    yield open_page
    for context in contexts:
        context.close()


@pytest.mark.parametrize(
    ("locale", "language", "settings", "lorebooks"),
    [("zh-CN", "zh-Hans", "设置", "世界书"), ("zh-TW", "zh-Hant", "設定", "世界書")],
)
def test_a_chinese_browser_gets_chat_characters_and_settings_in_its_script(
    browser_in: Any, site: Site, locale: str, language: str, settings: str, lorebooks: str
) -> None:
    tr = _catalogue(language)
    page = browser_in(locale)
    page.goto("/")
    expect(page.locator("html")).to_have_attribute("lang", language)
    nav = page.get_by_role("navigation")
    expect(nav.get_by_role("link", name=settings)).to_be_visible()
    expect(nav.get_by_role("link", name=lorebooks)).to_be_visible()
    # the characters screen
    expect(page.get_by_role("heading", name=tr["Characters"], level=1)).to_be_visible()
    mira = page.get_by_role("button", name=tr["Chat with {name}"].replace("{name}", "Mira"))
    expect(mira).to_be_visible()
    expect(page.get_by_label(tr["Search characters"])).to_be_visible()
    # a glyph of the page's script is drawn with a CJK font, not as a missing-glyph box
    assert _draws_cjk(page, settings), "no CJK font: apt-get install fonts-noto-cjk (.ci/run does)"
    _both_sizes(page, f"languages-{language}-characters")

    # the chat: composer, actions and a streamed reply, all named in the language
    chat = new_chat(site)
    open_chat(page, chat)
    site.upstream.script(Reply(text="你好，Ada。", pace=0.01))
    page.get_by_label(tr["Message"], exact=True).fill("你好")
    turn(page, lambda: page.get_by_role("button", name=tr["Send"], exact=True).click())
    expect(page.locator(".log .message").last.locator(".body")).to_have_text("你好，Ada。")
    expect(page.get_by_role("button", name=tr["Regenerate"]).last).to_be_visible()
    _both_sizes(page, f"languages-{language}-chat")

    # the settings, the Language switch showing the language in use
    page.goto("/#/settings")
    expect(page.get_by_role("heading", name=settings, level=1)).to_be_visible()
    switch = page.get_by_label(tr["Language of the interface"])
    expect(switch).to_have_value(language)
    expect(page.get_by_role("button", name=tr["Save name"])).to_be_visible()
    expect(page.get_by_role("region", name=tr["Connection profiles"])).to_be_visible()
    _both_sizes(page, f"languages-{language}-settings")


def test_the_language_switch_in_settings_changes_the_ui_and_is_kept(browser_in: Any) -> None:
    page = browser_in("en-US")
    page.goto("/#/settings")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.get_by_role("heading", name="Settings", level=1)).to_be_visible()
    page.get_by_label("Language of the interface").select_option(label="繁體中文")
    # the page is drawn again in the chosen language, the nav included
    expect(page.get_by_role("heading", name="設定", level=1)).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "zh-Hant")
    characters = page.get_by_role("navigation").get_by_role("link", name="角色", exact=True)
    expect(characters).to_be_visible()
    # kept in this browser: a reload, and another screen, stay in it
    page.reload()
    expect(page.get_by_role("heading", name="設定", level=1)).to_be_visible()
    page.goto("/#/lorebooks")
    expect(page.get_by_role("heading", name="世界書", level=1)).to_be_visible()
    # and back: each language is named in itself, so it is found in any
    page.goto("/#/settings")
    page.get_by_label("介面語言").select_option(label="简体中文")
    expect(page.get_by_role("heading", name="设置", level=1)).to_be_visible()
    page.get_by_label("界面语言").select_option(label="English")
    expect(page.get_by_role("heading", name="Settings", level=1)).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "en")


def test_an_english_or_other_browser_gets_english(browser_in: Any) -> None:
    for locale in ("en-GB", "fr-FR"):
        page = browser_in(locale)
        page.goto("/#/settings")
        expect(page.get_by_role("heading", name="Settings", level=1)).to_be_visible()
        expect(page.locator("html")).to_have_attribute("lang", "en")


def _draws_cjk(page: Page, text: str) -> bool:
    """Whether ``text`` is drawn wider than the same count of a glyph no font has (U+FFFF
    draws as the missing-glyph box in every font; a CJK glyph drawn from a real font differs
    from it) — and at all: a page without CJK fonts draws tofu of the box's width."""
    widths: list[float] = page.evaluate(
        """(text) => {
          const canvas = document.createElement("canvas").getContext("2d");
          canvas.font = getComputedStyle(document.body).font;
          const box = "\\uffff".repeat(text.length);
          return [canvas.measureText(text).width, canvas.measureText(box).width];
        }""",
        text,
    )
    return widths[0] > 0 and widths[0] != widths[1]


def _both_sizes(page: Page, name: str) -> None:
    screenshot(page, f"{name}-desktop")
    page.set_viewport_size(PHONE)
    screenshot(page, f"{name}-phone")
    page.set_viewport_size(DESKTOP)


def test_an_error_says_what_went_wrong_in_the_ui_language(browser_in: Any, site: Site) -> None:
    # worded from the answer's code and parameters: nothing of the server's English is left
    page = browser_in("zh-CN")
    page.goto("/#/chat/no-such-chat")
    # it stays on the page (not a toast that goes by), with a way on
    expect(page.get_by_role("heading", name="无法打开此页面")).to_be_visible()
    shown = page.get_by_role("alert")
    expect(shown).to_contain_text("找不到聊天“no-such-chat”。")
    expect(shown).not_to_contain_text("404")
    expect(page.get_by_role("link", name="返回角色列表")).to_be_visible()
    screenshot(page, "languages-zh-Hans-error")
