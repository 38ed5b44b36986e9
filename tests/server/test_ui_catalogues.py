"""The web UI's language catalogues (web/i18n/<language>.json, keyed by the English text that
the code passes to ``t()``): every language has exactly the English keys and keeps each text's
{placeholders} and {{macros}}; every key the code uses is in them and none is stale; and no
user-visible text is left in the code outside ``t()`` (a line-level check of the places text
goes: h() children, button(), toast(), alerts, confirm(), aria-label, placeholder, title...)."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from ._live import LiveServer

WEB = Path(str(resources.files("tavernkit.server") / "web"))
LANGUAGES = ("en", "zh-Hans", "zh-Hant")


def _catalogue(language: str) -> dict[str, str]:
    loaded = json.loads((WEB / "i18n" / f"{language}.json").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _placeholders(text: str) -> list[str]:
    """A text's {name} placeholders and {{macro}}s, sorted (a translation may reorder them)."""
    macros = re.findall(r"\{\{[^{}]*\}\}", text)
    names = re.findall(r"\{\w+\}", re.sub(r"\{\{[^{}]*\}\}", "", text))
    return sorted(macros + names)


#: texts that are names, the same in every language (samplers, a status line)
_NAMES = {"HTTP {status}", "Mirostat eta", "Mirostat tau", "Typical P"}


@pytest.mark.parametrize("language", LANGUAGES[1:])
def test_each_catalogue_has_the_english_keys_and_placeholders(language: str) -> None:
    english = _catalogue("en")
    translated = _catalogue(language)
    assert sorted(translated) == sorted(english), "keys differ from en.json"
    for key, text in translated.items():
        assert text.strip() or not key.strip(), f"{language}: empty translation of {key!r}"
        assert _placeholders(text) == _placeholders(key), f"{language}: placeholders of {key!r}"


def test_english_maps_each_text_to_itself() -> None:
    assert all(key == text for key, text in _catalogue("en").items())


def test_the_chinese_catalogues_are_translated_and_distinct() -> None:
    hans, hant = _catalogue("zh-Hans"), _catalogue("zh-Hant")
    assert (hans["Settings"], hant["Settings"]) == ("设置", "設定")
    assert (hans["Lorebooks"], hant["Lorebooks"]) == ("世界书", "世界書")
    assert (hans["Presets"], hant["Presets"]) == ("预设", "預設")
    has_letters = [k for k in hans if re.search(r"[A-Za-z]{4}", re.sub(r"\{+\w+\}+", "", k))]
    untranslated = [k for k in has_letters if k not in _NAMES and k in (hans[k], hant[k])]
    assert not untranslated, f"left in English: {untranslated[:10]}"
    assert sum(hans[k] != hant[k] for k in hans) > len(hans) // 2


_CALL = re.compile(r'(?<![\w.$])t\(\s*"((?:[^"\\\n]|\\.)*)"')


def _used_keys() -> set[str]:
    keys: set[str] = set()
    for path in WEB.rglob("*.js"):
        for match in _CALL.finditer(path.read_text(encoding="utf-8")):
            keys.add(json.loads('"' + match.group(1).replace("\\'", "'") + '"'))
    index = (WEB / "index.html").read_text(encoding="utf-8")
    keys.update(re.findall(r"data-i18n>([^<]+)<", index))
    return keys


def test_every_text_the_code_translates_is_in_the_catalogue_and_none_is_stale() -> None:
    used, english = _used_keys(), set(_catalogue("en"))
    assert not used - english, f"not in en.json: {sorted(used - english)[:10]}"
    assert not english - used, f"in en.json but used nowhere: {sorted(english - used)[:10]}"


# Where a string literal is text a user sees; the literal is group "text".
_CHAR = r"(?:(?!(?P=q))[^\\\n]|\\.)"
_LITERAL = r'(?P<q>["`])(?P<text>' + _CHAR + "*[A-Za-z]" + _CHAR + "*)(?P=q)"
_TEXT_PLACES = [
    re.compile(r"(?<![\w.])button\(\s*" + _LITERAL),
    re.compile(r"(?<![\w.])toast\(\s*" + _LITERAL),
    re.compile(r"\.show\(\s*" + _LITERAL),
    re.compile(r"(?<![\w.])(?:window\.)?(?:confirm|alert|prompt)\(\s*" + _LITERAL),
    re.compile(r'(?:"aria-label"|placeholder|title|alt|label):\s*' + _LITERAL),
    re.compile(r"\.textContent\s*=\s*" + _LITERAL),
    # h("tag", {attributes}, "text"...): a child right after a flat attribute object
    re.compile(r'(?<![\w.])h\(\s*"\w+",\s*\{[^{}]*\},\s*' + _LITERAL),
]
#: literals in those places that are not words for a reader
_NOT_TEXT = {"https://…/v1", "https://…/mcp"}


def _unwrapped(source: str) -> list[str]:
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith("//"):
            continue
        for place in _TEXT_PLACES:
            for match in place.finditer(line):
                text = match.group("text")
                # a template's text is what it says outside ${...}: `#${n}` names nothing
                words = re.sub(r"\$\{[^}]*\}", "", text) if match.group("q") == "`" else text
                if re.search("[A-Za-z]", words) and text not in _NOT_TEXT:
                    found.append(f"{number}: {match.group(0)}")
    return found


def test_no_user_visible_text_is_left_outside_t() -> None:
    left = {
        path.relative_to(WEB).as_posix(): _unwrapped(path.read_text(encoding="utf-8"))
        for path in sorted(WEB.rglob("*.js"))
    }
    left = {name: lines for name, lines in left.items() if lines}
    assert not left, f"text outside t(): {left}"


def test_the_check_finds_unwrapped_text() -> None:
    assert _unwrapped('button("Save", save); toast(`Saved ${name}`);') != []
    assert len(_unwrapped('h("p", { class: "muted" }, "No chats yet.")')) == 1
    assert _unwrapped('button(t("Save"), save); h("span", { class: "x" }, name)') == []


async def test_the_catalogues_are_served_as_json_under_the_csp(local: LiveServer) -> None:
    async with local.client() as client:
        answer = await client.get("/ui/i18n/zh-Hant.json")
        listing = (await client.get("/shell.json")).json()["files"]
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert "default-src 'self'" in answer.headers["content-security-policy"]
    assert answer.json()["Settings"] == "設定"
    # cached with the shell, so an installed app opens offline in its language
    assert {f"/ui/i18n/{language}.json" for language in LANGUAGES} <= set(listing)
