"""The world-info scan of one generation, fed the way SillyTavern's ``Generate`` feeds it.

``Generate`` builds the scan texts from the chat (hidden messages dropped, the first message
macro-substituted, ``"Name: text"`` when names are included, newest first), hands the card and
persona texts over as ``global_scan_data``, and scans with the max *prompt* tokens (context
minus response) as the budget basis. The store-backed pipeline and the replay of recorded
generations both go through here, so they cannot drift apart.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tavernkit.prompt.card import CardFields, card_fields
from tavernkit.prompt.state import PromptState, Substitute
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = ["prompt_budget", "scan_texts", "scan_world_info"]


def scan_texts(state: PromptState, substitute: Substitute, *, include_names: bool) -> list[str]:
    """The chat as world info scans it: newest first (the first visible message substituted).

    The scan wants every message (timed effects count them), so this is the one per-message
    pass of a build that cannot stop early: one comprehension keeps it as cheap as Python
    allows, and the first visible message is redone with its macros afterwards.
    """
    messages = state.messages
    if include_names:
        out = [
            f"{m.name}: {m.mes}" if m.mes.__class__ is str else f"{m.name}: {m.text}"
            for m in messages
            if not m.is_system
        ]
    else:
        out = [m.mes if m.mes.__class__ is str else m.text for m in messages if not m.is_system]
    if not out:
        return out
    first = next(m for m in messages if not m.is_system)
    text = substitute(first.mes if isinstance(first.mes, str) else first.text)
    out[0] = f"{first.name}: {text}" if include_names else text
    out.reverse()
    return out


def prompt_budget(state: PromptState, *, is_chat: bool) -> int:
    """Max prompt tokens: the context minus the response (the preset's for chat completion)."""
    if is_chat and state.preset is not None:
        context = state.max_context if state.max_context is not None else None
        response = state.max_response if state.max_response is not None else None
        return (context if context is not None else state.preset.openai_max_context) - (
            response if response is not None else state.preset.openai_max_tokens
        )
    context = state.max_context if state.max_context is not None else state.settings.max_context
    response = state.max_response if state.max_response is not None else state.settings.amount_gen
    return context - response


def scan_world_info(
    state: PromptState,
    books: Iterable[Any],
    settings: Any,
    substitute: Substitute,
    *,
    kind: str = "normal",
    is_chat: bool,
    count_tokens: Callable[[str], int],
    character_filename: str | None = None,
    rng: Callable[[], float] | None = None,
    compat: str = "default",
    dry_run: bool = False,
    scan: Callable[..., Any] | None = None,
    card: CardFields | None = None,
) -> WorldInfoResult:
    """Scan ``books`` (``(name, data, scope)`` tuples or ``worldinfo.Book`` values) for the
    chat of ``state``. ``settings`` is anything ``ScanSettings.coerce`` reads (SillyTavern's
    ``world_info_*`` mapping, our ``WorldInfoSettings`` model...). ``rng`` feeds probability and
    group rolls (a fresh unseeded generator by default). ``card`` is the build's evaluated card
    fields: pass the ones the prompt will use, so a card's macros run once per generation."""
    if scan is None:
        from tavernkit.worldinfo.scan import scan as wi_scan

        scan = wi_scan
    fields = card if card is not None else card_fields(state, substitute)
    include_names = _include_names(settings)
    metadata = state.chat_metadata
    timed = metadata.timed_world_info.to_wire() if metadata and metadata.timed_world_info else None
    result: WorldInfoResult = scan(
        list(books),
        scan_texts(state, substitute, include_names=include_names),
        max_context=prompt_budget(state, is_chat=is_chat),
        settings=settings,
        global_scan_data={
            "personaDescription": fields.persona,
            "characterDescription": fields.description,
            "characterPersonality": fields.personality,
            "characterDepthPrompt": fields.depth_prompt,
            "scenario": fields.scenario,
            "creatorNotes": fields.creator_notes,
            "trigger": kind,
        },
        trigger=kind,
        character_filename=character_filename,
        timed_state=timed,
        substitute=substitute,
        count_tokens=count_tokens,
        rng=rng if rng is not None else random.Random().random,
        dry_run=dry_run,
        compat=compat,
    )
    return result


def _include_names(settings: Any) -> bool:
    if isinstance(settings, Mapping):
        if "world_info_include_names" in settings:
            return bool(settings["world_info_include_names"])
        return bool(settings.get("include_names", True))
    return bool(getattr(settings, "include_names", True))
