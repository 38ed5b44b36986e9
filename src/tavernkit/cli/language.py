"""The CLI's messages in English, 简体中文 or 繁體中文: ``say("deleted message #{index}",
index=3)``. The English text is the key of small JSON catalogues (``cli/i18n/<language>.json``,
the same format as the web UI's ``server/web/i18n``): one format and one test for both, no
compile step (gettext's ``.mo`` files would need ``msgfmt`` and a build), and nothing imported
but :mod:`json`, so ``tavernkit --help`` stays light.

The language is ``--lang`` (en, zh-Hans, zh-Hant) when given, else the locale the way POSIX
orders it: ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` (``zh_CN.UTF-8`` → zh-Hans, ``zh_TW`` /
``zh_HK`` / ``zh_MO`` → zh-Hant; anything else → English). Help texts stay in English."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from importlib import resources

__all__ = ["LANGUAGES", "language_of", "say", "set_language"]

LANGUAGES = ("en", "zh-Hans", "zh-Hant")

_chosen: str | None = None


def language_of(locale: str) -> str | None:
    """``zh_TW.UTF-8``, ``zh-Hant``, ``en_US`` ... -> one of :data:`LANGUAGES`; ``None`` for a
    locale the CLI has no catalogue for (``C``, ``fr_FR``)."""
    tag = locale.split(".")[0].split("@")[0].replace("_", "-").lower()
    if tag == "en" or tag.startswith("en-"):
        return "en"
    if tag != "zh" and not tag.startswith("zh-"):
        return None
    return "zh-Hant" if re.search(r"-(hant|tw|hk|mo)(-|$)", tag) else "zh-Hans"


def _from_environment(environ: Mapping[str, str]) -> str:
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name)
        if value:  # the first one set decides, as in POSIX
            return language_of(value) or "en"
    return "en"


def set_language(language: str | None) -> None:
    """Use ``language`` (``--lang``); ``None``: the locale's."""
    global _chosen
    if language is not None and language not in LANGUAGES:
        found = language_of(language)
        if found is None:
            raise ValueError(f"no CLI language {language!r}: choose {', '.join(LANGUAGES)}")
        language = found
    _chosen = language


def current_language() -> str:
    return _chosen or _from_environment(os.environ)


@functools.cache
def _catalogue(language: str) -> dict[str, str]:
    if language == "en":
        return {}
    text = (resources.files("tavernkit.cli") / "i18n" / f"{language}.json").read_text("utf-8")
    loaded: dict[str, str] = json.loads(text)
    return loaded


def say(text: str, /, **values: object) -> str:
    """``text`` in the CLI's language, its ``{name}`` placeholders filled from ``values``."""
    template = _catalogue(current_language()).get(text) or text
    if not values:
        return template
    return re.sub(
        r"\{(\w+)\}",
        lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0),
        template,
    )
