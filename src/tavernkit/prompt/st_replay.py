"""Replay one recorded SillyTavern generation through tavernkit: world-info scan, then the
prompt builder, sharing one macro environment as SillyTavern's ``Generate`` does.

Used by the conformance suite (prompt goldens) and ``benchmarks/prompt.py`` (the perf inputs),
and handy for checking an exported SillyTavern state against tavernkit.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.prompt.assembled import AssembledChat, AssembledText
from tavernkit.prompt.macros import macro_substitute
from tavernkit.prompt.pipeline import PromptBuild
from tavernkit.prompt.st_state import prompt_state_from_st
from tavernkit.prompt.state import PromptState, chat_before_generation
from tavernkit.text.tokens import ByteEstimateTokenizer, Tokenizer, tokenizer_for_model

__all__ = ["Replay", "perf_case_inputs", "prepare_replay", "replay_generation"]


@dataclass(slots=True)
class Replay:
    """A parsed recorded generation, ready to run (parse once, run many times)."""

    state: PromptState
    books: list[tuple[str, Any, str]]
    wi_settings: dict[str, Any]
    avatar: str
    compat: str

    @property
    def is_chat(self) -> bool:
        return self.state.preset is not None and self.state.settings.main_api == "openai"

    def default_tokenizer(self) -> Tokenizer:
        if self.is_chat:
            return tokenizer_for_model(self.state.model)
        return ByteEstimateTokenizer()

    def run(
        self,
        *,
        kind: str = "normal",
        quiet_prompt: str = "",
        tokenizer: Tokenizer | None = None,
        rng: Callable[[], float] | None = None,
        engine: Callable[..., Any] | None = None,
        scan: Callable[..., Any] | None = None,
    ) -> AssembledChat | AssembledText:
        state = self.state
        chat = chat_before_generation(state.messages, kind)
        if len(chat) != len(state.messages):
            state = state.replace(messages=list(chat))
        build = _RecordedBuild(
            prompt_state=state,
            substitute=macro_substitute(state, compat=self.compat),
            compat=self.compat,
            _tokenizer=tokenizer if tokenizer is not None else self.default_tokenizer(),
            replay=self,
        )
        # the pipeline's stages (scan, then build, sharing the card fields and the macro
        # environment as SillyTavern's ``Generate`` does); only the state's source differs
        prompt, _ = build.run(
            kind,
            rng=rng if rng is not None else random.Random(0).random,
            quiet_prompt=quiet_prompt,
            scanner=scan,
            engine=engine,
        )
        return prompt


@dataclass(kw_only=True)
class _RecordedBuild(PromptBuild):
    """A build of a recorded generation: the scan reads the recording's books and settings."""

    replay: Replay

    @property
    def is_chat(self) -> bool:
        # a recording is chat completion only with its preset (a state's: by its family alone)
        return self.replay.is_chat

    def scan_books(self) -> tuple[Sequence[Any], Any, str | None]:
        avatar = self.replay.avatar
        filename = avatar.rsplit(".", 1)[0] if avatar else None
        return self.replay.books, self.replay.wi_settings, filename


def prepare_replay(
    inputs: Mapping[str, Any],
    effective: Mapping[str, Any] | None = None,
    *,
    compat: str = "st-1.18",
) -> Replay:
    """Parse a prompt case's ``inputs`` and ``effective_settings``."""
    effective = effective or {}
    books: list[tuple[str, Any, str]] = [
        (b["name"], b["data"], b.get("scope", "global")) for b in inputs.get("books") or []
    ]
    char_book = inputs.get("character_world_book")
    if isinstance(char_book, Mapping) and char_book.get("data"):
        books.append((char_book["name"], char_book["data"], "character"))
    wi_settings = dict(effective.get("world_info") or {})
    wi_settings.update(inputs.get("wi_settings") or {})
    return Replay(
        state=prompt_state_from_st(inputs, effective),
        books=books,
        wi_settings=wi_settings,
        avatar=str(inputs.get("card_avatar") or ""),
        compat=compat,
    )


def replay_generation(
    inputs: Mapping[str, Any],
    effective: Mapping[str, Any] | None = None,
    *,
    kind: str = "normal",
    quiet_prompt: str = "",
    tokenizer: Tokenizer | None = None,
    compat: str = "st-1.18",
    rng: Callable[[], float] | None = None,
    engine: Callable[..., Any] | None = None,
    scan: Callable[..., Any] | None = None,
) -> AssembledChat | AssembledText:
    """Build the request prompt of a prompt case (``inputs`` + ``effective_settings``).

    ``engine`` overrides the builder (chat or text by the case's API); ``scan`` the world-info
    scan. ``rng`` feeds probability rolls (a fixed seed by default: the recordings roll none).
    """
    return prepare_replay(inputs, effective, compat=compat).run(
        kind=kind,
        quiet_prompt=quiet_prompt,
        tokenizer=tokenizer,
        rng=rng,
        engine=engine,
        scan=scan,
    )


def perf_case_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``st-1.18-perf/prompt_build_inputs.json`` in the shape of a prompt case's ``inputs``."""
    settings = dict(inputs.get("settings") or {})
    return {
        "card": inputs["card"],
        "card_avatar": f"{inputs.get('avatar_base', '')}.png",
        "persona": inputs.get("persona"),
        "preset": inputs["preset"],
        "books": [inputs["lorebook"]] if inputs.get("lorebook") else [],
        "wi_settings": inputs.get("wi_settings") or {},
        "chat": inputs["chat"],
        "generate": {"type": "normal"},
        "settings": {
            "main_api": settings.get("main_api", "openai"),
            "cc_custom_model": settings.get("custom_model", ""),
        },
    }
