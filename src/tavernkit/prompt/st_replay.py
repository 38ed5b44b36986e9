"""Replay one recorded SillyTavern generation through tavernkit: world-info scan, then the
prompt builder, sharing one macro environment as SillyTavern's ``Generate`` does.

Used by the conformance suite (prompt goldens) and ``benchmarks/prompt.py`` (the perf inputs),
and handy for checking an exported SillyTavern state against tavernkit.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tavernkit.prompt.assembled import AssembledChat, AssembledText
from tavernkit.prompt.card import card_fields
from tavernkit.prompt.chat_completion import build_chat_completion
from tavernkit.prompt.extensions import worldinfo_outlets
from tavernkit.prompt.macros import macro_substitute
from tavernkit.prompt.st_state import prompt_state_from_st
from tavernkit.prompt.state import PromptState, chat_before_generation
from tavernkit.prompt.text_completion import build_text_completion
from tavernkit.prompt.wi_scan import scan_world_info
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
        tokenizer = tokenizer if tokenizer is not None else self.default_tokenizer()
        sub = macro_substitute(state, compat=self.compat)
        # once per generation, shared by the scan and the builder (as in ``Generate``)
        fields = card_fields(state, sub)
        wi = None
        if self.books:
            wi = scan_world_info(
                state,
                self.books,
                self.wi_settings,
                sub,
                kind=kind,
                is_chat=self.is_chat,
                count_tokens=tokenizer.count,
                character_filename=self.avatar.rsplit(".", 1)[0] if self.avatar else None,
                rng=rng if rng is not None else random.Random(0).random,
                compat=self.compat,
                scan=scan,
                card=fields,
            )
            sub.env.outlets = worldinfo_outlets(wi)
        if engine is None:
            engine = build_chat_completion if self.is_chat else build_text_completion
        result: AssembledChat | AssembledText = engine(
            state,
            wi,
            kind=kind,
            tokenizer=tokenizer,
            compat=self.compat,
            substitute=sub,
            quiet_prompt=quiet_prompt,
            card=fields,
        )
        return result


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
