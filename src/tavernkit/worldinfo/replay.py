"""Replay a recorded SillyTavern world-info scenario (the conformance schema, README §2).

Used by the conformance adapter, the golden tests and the benchmark: it turns a scenario's
books, character, persona, chat and settings into :func:`~tavernkit.worldinfo.scan` calls, one
per recorded turn, on one persistent chat and timed state.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tavernkit.worldinfo.buffer import scan_chat
from tavernkit.worldinfo.index import Book, WorldInfoEngine
from tavernkit.worldinfo.result import WorldInfoResult
from tavernkit.worldinfo.scan import COMPAT_ST_118, scan
from tavernkit.worldinfo.settings import ScanSettings
from tavernkit.worldinfo.timed import empty_timed_state
from tavernkit.worldinfo.tokens import TokenCounter, estimate_tokens

__all__ = ["ReplayedTurn", "ScenarioReplay", "name_substitute", "scenario_books"]

_SCOPES = {
    "global": "global",
    "character": "character",
    "character_extra": "character",
    "chat": "chat",
    "persona": "persona",
}


def name_substitute(char: str, user: str) -> Callable[[str], str]:
    """The smallest macro substitute: ``{{char}}`` and ``{{user}}`` (case-insensitive)."""

    def substitute(text: str) -> str:
        if "{{" not in text:
            return text
        out = text
        for name, value in (("char", char), ("user", user)):
            lowered = out.lower()
            token = "{{" + name + "}}"
            start = lowered.find(token)
            while start != -1:
                out = out[:start] + value + out[start + len(token) :]
                lowered = out.lower()
                start = lowered.find(token, start + len(value))
        return out

    return substitute


def scenario_books(scenario: Mapping[str, Any]) -> list[Book]:
    """The scenario's books in SillyTavern's load order: global books in their selection order,
    the character's primary book, its extra books, the chat book, the persona book."""
    books = list(scenario.get("books") or [])
    selected = ((scenario.get("effective_settings") or {}).get("world_info") or {}).get(
        "selected_world_info"
    ) or []
    rank = {name: i for i, name in enumerate(selected)}
    scope_rank = {"global": 0, "character": 1, "character_extra": 2, "chat": 3, "persona": 4}
    ordered = sorted(
        enumerate(books),
        key=lambda p: (
            scope_rank.get(p[1].get("scope"), 9),
            rank.get(p[1].get("name"), len(rank)) if p[1].get("scope") == "global" else 0,
            p[0],
        ),
    )
    return [
        Book(str(b["name"]), b["data"], _SCOPES.get(b.get("scope", "global"), "global"))  # type: ignore[arg-type]
        for _, b in ordered
    ]


def _copy_messages(messages: Any) -> list[dict[str, Any]]:
    return [dict(m) if isinstance(m, dict | Mapping) else m for m in messages or []]


@dataclass(frozen=True, slots=True)
class ReplayedTurn:
    result: WorldInfoResult
    st_result: dict[str, Any]
    timed_state_after: dict[str, Any]
    scan_chat_length: int


class ScenarioReplay:
    """One scenario's persistent state; :meth:`run_turn` plays the next recorded turn."""

    def __init__(
        self,
        scenario: Mapping[str, Any],
        *,
        substitute: Callable[[str], str] | None = None,
        count_tokens: TokenCounter = estimate_tokens,
        engine: WorldInfoEngine | None = None,
        compat: str = COMPAT_ST_118,
    ) -> None:
        self.scenario = scenario
        self.settings = ScanSettings.from_st(scenario.get("settings") or {})
        character = scenario.get("character") or {}
        persona = scenario.get("persona") or {}
        self.char_name = str(character.get("name") or "")
        self.user_name = str(persona.get("name") or "User")
        self.substitute = substitute or name_substitute(self.char_name, self.user_name)
        self.count_tokens = count_tokens
        self.engine = engine or WorldInfoEngine()
        self.compat = compat
        self.books = scenario_books(scenario)
        # Messages are only read (never mutated), so a shallow copy per message keeps the
        # scenario intact without a deep copy of a long chat on every replay.
        self.chat: list[dict[str, Any]] = _copy_messages(scenario.get("chat"))
        self.timed_state: dict[str, Any] = empty_timed_state()
        self.character_filename = character.get("avatar_base")
        tags = character.get("tag_ids")
        self.character_tags: list[str] | None = list(tags) if isinstance(tags, list) else []
        if not character:
            self.character_filename, self.character_tags = None, None

    def run_turn(
        self, turn: Mapping[str, Any], rng: Callable[[], float], *, dry_run: bool = False
    ) -> ReplayedTurn:
        if turn.get("set_chat_length") is not None:
            del self.chat[int(turn["set_chat_length"]) :]
        self.chat.extend(_copy_messages(turn.get("append")))
        trigger = str(turn.get("trigger") or "normal")
        texts = scan_chat(
            self.chat,
            include_names=self.settings.include_names,
            substitute=self.substitute,
            trigger="normal",  # the recorder builds the list without popping for swipes
        )
        result = scan(
            self.books,
            texts,
            max_context=self.scenario.get("max_context") or 0,
            settings=self.settings,
            global_scan_data=turn.get("global_scan_data") or {},
            trigger=trigger,
            inject=list(self.scenario.get("inject_scan") or []),
            character_filename=self.character_filename,
            character_tags=self.character_tags,
            timed_state=self.timed_state,
            substitute=self.substitute,
            count_tokens=self.count_tokens,
            rng=rng,
            dry_run=dry_run,
            compat=self.compat,
            engine=self.engine,
        )
        if not dry_run:
            self.timed_state = result.timed_state
        return ReplayedTurn(result, result.to_st(), copy.deepcopy(result.timed_state), len(texts))
