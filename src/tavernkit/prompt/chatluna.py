"""The prompt ChatLuna builds from a preset: its prompts, the history, matched world lore, the
user's formatted input and the author's note, in ChatLuna's order.

After ChatLuna's ``ChatLunaChatPrompt.formatMessages`` and ``LoreBookMatcher`` (ChatLunaLab/
chatluna ``packages/core/src/llm-core/chain/prompt.ts`` and ``memory/lore_book/index.ts``):

1. the preset's prompts, rendered in ChatLuna's dialect;
2. the history, oldest first;
3. the matched lore entries, grouped by their ``insertPosition`` and wrapped in
   ``config.loreBooksPrompt`` (default ``{input}``) as one user message per group: entries
   without a position go last (after the history) and, as in ChatLuna, end the placement, so a
   group after them in entry order is dropped; positioned groups go before/after the prompt of
   the matching ``type`` (``description``, ``scenario``, ``example_message_first``...);
4. the user's input wrapped in ``format_user_prompt``;
5. the author's note as a system message: ``in_chat`` at ``insertDepth`` messages before the
   last one, ``after_char_defs`` after the character definitions; an ``insertFrequency`` of 0
   leaves it out.

Lore matching: the most recent ``scanDepth`` messages (the input included; default 2) are
searched for each enabled entry's keywords, which are ECMAScript regexes (case-insensitive
unless ``caseSensitive``; ``matchWholeWord`` wraps them in ``\\b`` and splits the text at
punctuation); a matched entry's content is scanned again (``recursiveScan``, default on) up to
``maxRecursionDepth`` (default 3); matches are ordered by ``order``. ChatLuna's token budgets
(the model's context, the lore ``tokenLimit``) are not applied here: the caller trims.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import regress

from tavernkit.models.chatluna import ChatLunaLore, ChatLunaPreset
from tavernkit.text.render import PromptRenderer, RenderOptions

__all__ = ["BuiltChatLunaPrompt", "build_chatluna_prompt", "match_lore"]

_SPLIT = re.compile(r"[。！？；;.!?,，、：\s]+")


@dataclass(frozen=True, slots=True)
class BuiltChatLunaPrompt:
    """The messages (``{"role", "content"}``), the lore entries that matched, and the
    variable names the templates used."""

    messages: list[dict[str, Any]]
    lore: list[ChatLunaLore]
    variables: list[str]


@dataclass(frozen=True, slots=True)
class _Config:
    scan_depth: int
    recursive: bool
    max_depth: int
    whole_word: bool


def _config(lore: ChatLunaLore, defaults: ChatLunaLore | None) -> _Config:
    def pick(name: str, fallback: Any) -> Any:
        own = getattr(lore, name)
        if own is not None:
            return own
        shared = getattr(defaults, name) if defaults is not None else None
        return fallback if shared is None else shared

    return _Config(
        scan_depth=int(pick("scanDepth", 2)),
        recursive=bool(pick("recursiveScan", True)),
        max_depth=int(pick("maxRecursionDepth", 3)),
        whole_word=bool(lore.matchWholeWord) if lore.matchWholeWord is not None else False,
    )


def _regexes(lore: ChatLunaLore) -> list[Any]:
    flags = None if lore.caseSensitive else "i"
    out = []
    for keyword in lore.keyword_list():
        pattern = rf"\b{keyword}\b" if lore.matchWholeWord else keyword
        try:
            out.append(regress.Regex(pattern, flags))
        except Exception:
            continue  # ChatLuna would throw on the whole chat; one bad keyword is left out
    return out


def _parts(config: _Config, text: str) -> list[str]:
    return [p for p in _SPLIT.split(text) if p] if config.whole_word else [text]


def match_lore(preset: ChatLunaPreset, texts: Sequence[str]) -> list[ChatLunaLore]:
    """The lore entries ``texts`` (oldest first, the input last) trigger, by ``order``."""
    entries = [lore for lore in preset.lore_entries() if lore.enabled is not False]
    defaults = preset.lore_defaults()
    configs = [_config(lore, defaults) for lore in entries]
    regexes = [_regexes(lore) for lore in entries]
    matched: dict[int, None] = {}
    stack: list[tuple[list[str], int]] = [(list(reversed(texts)), 0)]
    while stack:
        current, depth = stack.pop()
        for n, lore in enumerate(entries):
            config = configs[n]
            if n in matched or depth >= config.max_depth:
                continue
            for text in current[: config.scan_depth]:
                if any(
                    r.find(part) is not None for part in _parts(config, text) for r in regexes[n]
                ):
                    matched[n] = None
                    if config.recursive:
                        stack.append((_parts(config, lore.content or ""), depth + 1))
                    break
    found = [entries[n] for n in matched]
    return sorted(found, key=lambda lore: lore.order or 0)


def _find_index(messages: list[dict[str, Any]], position: str, system_count: int) -> int:
    """ChatLuna's ``_findIndex`` (personality is looked up as ``description`` there too)."""
    if position == "in_chat":
        return len(messages) - 1

    def index_of(kind: str) -> int:
        return next((n for n, m in enumerate(messages) if m.get("_type") == kind), -1)

    description = index_of("description")
    scenario = index_of("scenario")
    example_start = index_of("example_message_first")
    example_end = index_of("example_message_last")
    first_message = index_of("first_message")
    char_defs = description
    if position == "before_char_defs":
        return char_defs if char_defs != -1 else 1
    if position == "after_char_defs":
        if scenario != -1:
            return scenario + 1
        return char_defs + 1 if char_defs != -1 else system_count + 1
    if position == "before_example_messages":
        if example_start != -1:
            return example_start
        if first_message != -1:
            return first_message
        return char_defs + 1 if char_defs != -1 else 1
    if position == "after_example_messages":
        if example_end != -1:
            return example_end + 1
        return char_defs + 1 if char_defs != -1 else system_count - 1
    return 1


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


async def build_chatluna_prompt(
    renderer: PromptRenderer,
    preset: ChatLunaPreset,
    history: Sequence[Mapping[str, Any]],
    user_input: str,
    variables: Mapping[str, Any] | None = None,
    options: RenderOptions | None = None,
) -> BuiltChatLunaPrompt:
    """The prompt of one turn (see the module docstring). ``history`` is ``{"role",
    "content"}`` messages, oldest first; ``user_input`` the user's raw message; ``variables``
    the template variables (``name``, ``sender``, ``date``...)."""
    variables = dict(variables or {})
    rendered = await renderer.render_chatluna_preset(preset, variables, options)
    messages: list[dict[str, Any]] = [
        {**m, "_type": p.type} for m, p in zip(rendered.messages, preset.prompts, strict=True)
    ]
    system_count = len(messages)
    used = dict.fromkeys(rendered.variables)
    messages += [dict(m) for m in history]
    formatted = await renderer.format_chatluna_input(preset, user_input, variables, options)
    used.update(dict.fromkeys(formatted.variables))
    lore = match_lore(preset, [*(_text(m) for m in history), formatted.text])
    if lore:
        wrapper = (preset.config or {}).get("loreBooksPrompt") or "{input}"
        groups: dict[str, list[str]] = {}
        for entry in lore:
            groups.setdefault(entry.insertPosition or "default", []).append(entry.content or "")
        for position, contents in groups.items():
            body = await renderer.render_template(
                wrapper.replace("{input}", "\n".join(contents)),
                variables,
                _chatluna(options),
            )
            message = {"role": "user", "content": body.text}
            if position == "default":
                messages.append(message)
                break  # ChatLuna returns here: later groups are not placed
            messages.insert(_find_index(messages, position, system_count), message)
    messages.append({"role": "user", "content": formatted.text})
    note = preset.note
    if note is not None and note.insertFrequency != 0:
        body = await renderer.render_template(note.content, variables, _chatluna(options))
        used.update(dict.fromkeys(body.variables))
        at = _find_index(messages, note.insertPosition, system_count)
        if note.insertPosition == "in_chat":
            at -= note.insertDepth
        messages.insert(at, {"role": "system", "content": body.text})
    clean = [{k: v for k, v in m.items() if k != "_type"} for m in messages]
    return BuiltChatLunaPrompt(clean, lore, list(used))


def _chatluna(options: RenderOptions | None) -> RenderOptions:
    return dataclasses.replace(options or RenderOptions(), syntax="chatluna")
