"""``MacroEnv``: everything a macro may read, in one value built once per render.

The fields mirror SillyTavern's macro environment (names, card fields, chat statistics,
instruct sequences, state) plus what tavernkit injects instead of reading globals: the clock,
the time zone, the random generator, the variable store and the ``{{pick}}`` seed. Card
fields are taken as given: callers that want SillyTavern's ``baseChatReplace`` pass them
already substituted (``env_from_chat_state`` does).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, Literal, Protocol

from tavernkit.text.variables import InMemoryVariables, VariableStore

__all__ = ["Compat", "MacroEnv", "RandomSource", "env_from_chat_state"]

Compat = Literal["default", "st-1.18"]


class RandomSource(Protocol):
    def random(self) -> float: ...


_SHARED_RANDOM: RandomSource = random.Random()


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class MacroEnv:
    # names
    user: str = "User"
    char: str = ""
    group: str | None = None
    group_not_muted: str | None = None
    not_char: str | None = None
    # character card and persona (already macro-substituted where SillyTavern does that)
    char_prompt: str = ""
    char_instruction: str = ""
    char_jailbreak: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    persona: str = ""
    mes_examples_raw: str = ""
    mes_examples: str | None = None
    char_version: str = ""
    char_depth_prompt: str = ""
    creator_notes: str = ""
    first_message: str = ""
    alternate_greetings: Sequence[str] = ()
    # chat statistics (message macros skip a swipe still in progress, as SillyTavern does)
    chat_id: str | None = None
    last_message: str = ""
    last_message_id: int | None = None
    last_user_message: str = ""
    last_char_message: str = ""
    first_included_message_id: int | None = None
    first_displayed_message_id: int | None = None
    last_swipe_id: int | None = None
    current_swipe_id: int | None = None
    message_count: int = 0
    idle_since: datetime | None = None
    # generation state
    model: str = ""
    provider: str = ""
    input: str = ""
    original: str | None = None
    max_prompt: int = 0
    max_context: int = 0
    max_response: int = 0
    last_generation_type: str = ""
    is_mobile: bool = False
    extensions: Sequence[str] = ()
    outlets: Mapping[str, str] | None = None
    # instruct / context / system prompt in force (SillyTavern JSON field names)
    instruct_enabled: bool = False
    instruct: Mapping[str, Any] | None = None
    sysprompt_enabled: bool = False
    system_prompt: str = ""
    prefer_character_prompt: bool = True
    example_separator: str = ""
    chat_start: str = ""
    # injected effects
    clock: Callable[[], datetime] = _utc_now
    tz: tzinfo = UTC
    #: Draws for {{random}}, {{roll}}, {{uuid}}; None: a process-wide unseeded generator.
    rng: RandomSource | None = None
    #: Draws for {{random}} alone; None: ``rng``. SillyTavern takes them from seedrandom, not
    #: Math.random, so a replay of its ``Math.random`` draws (STscript's ``/rand``) sets this.
    random_macro_rng: RandomSource | None = None
    variables: VariableStore = field(default_factory=InMemoryVariables)
    chat_id_hash: int | None = None
    pick_reroll_seed: str | int | None = None
    compat: Compat = "default"
    #: Per-call macros (case-insensitive): a string, or a function of no arguments.
    dynamic_macros: Mapping[str, str | Callable[[], Any]] | None = None
    #: Applied to every macro result (SillyTavern's ``postProcess``).
    post_process: Callable[[str], str] | None = None
    #: Words ``{{banned}}`` collected during the render (the text-completion ban list).
    banned_words: list[str] | None = None

    def random_source(self) -> RandomSource:
        # Without an injected generator: the standard library's shared one, as SillyTavern
        # uses Math.random (a fresh random.Random() per environment costs a urandom seeding
        # on every render, more than the macros that draw from it).
        if self.rng is None:
            return _SHARED_RANDOM
        return self.rng


def _get(obj: Any, *path: str, default: Any = None) -> Any:
    for name in path:
        if obj is None:
            return default
        obj = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
    return default if obj is None else obj


def env_from_chat_state(state: Any, **overrides: Any) -> MacroEnv:
    """Build the environment for one turn from a ``ChatState`` (duck-typed).

    Reads ``character``, ``persona``, ``messages``, ``chat`` (id, metadata), ``profile``
    (model, provider) and ``variables`` where present; anything missing keeps the default.
    ``overrides`` win (e.g. ``input=``, ``original=``, ``clock=``).
    """
    character = _get(state, "character")
    data = _get(character, "data", default=character)
    persona = _get(state, "persona")
    messages = list(_get(state, "messages", default=()) or ())
    chat = _get(state, "chat")
    metadata = _get(chat, "metadata", default={}) or {}
    visible = [m for m in messages if not _get(m, "is_system", default=False)]
    last = visible[-1] if visible else None
    last_user = next((m for m in reversed(visible) if _get(m, "is_user", default=False)), None)
    last_char = next((m for m in reversed(visible) if not _get(m, "is_user", default=False)), None)

    def text(msg: Any) -> str:
        return str(_get(msg, "mes", default=_get(msg, "text", default="")) or "")

    swipes = _get(last, "swipes", default=None)
    values: dict[str, Any] = {
        "user": _get(persona, "name", default="User"),
        "char": _get(data, "name", default=""),
        "description": _get(data, "description", default=""),
        "personality": _get(data, "personality", default=""),
        "scenario": _get(data, "scenario", default=""),
        "persona": _get(persona, "description", default=""),
        "mes_examples_raw": _get(data, "mes_example", default=""),
        "char_prompt": _get(data, "system_prompt", default=""),
        "char_instruction": _get(data, "post_history_instructions", default=""),
        "char_version": _get(data, "character_version", default=""),
        "creator_notes": _get(data, "creator_notes", default=""),
        "first_message": _get(data, "first_mes", default=""),
        "alternate_greetings": tuple(_get(data, "alternate_greetings", default=()) or ()),
        "char_depth_prompt": _get(data, "extensions", "depth_prompt", "prompt", default=""),
        "chat_id": _get(chat, "id", default=None),
        "message_count": len(messages),
        "last_message": text(last) if last is not None else "",
        "last_message_id": len(messages) - 1 if messages else None,
        "last_user_message": text(last_user) if last_user is not None else "",
        "last_char_message": text(last_char) if last_char is not None else "",
        "last_swipe_id": len(swipes) if isinstance(swipes, list) else None,
        "current_swipe_id": (_get(last, "swipe_id", default=0) + 1) if swipes else None,
        "model": _get(state, "profile", "model", default=""),
        "provider": _get(state, "profile", "source", default=""),
        "chat_id_hash": metadata.get("chat_id_hash") if isinstance(metadata, Mapping) else None,
    }
    variables = _get(state, "variables")
    if variables is not None:
        values["variables"] = variables
    values.update(overrides)
    return MacroEnv(**values)
