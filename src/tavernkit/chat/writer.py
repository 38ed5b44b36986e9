"""A character's own "writer": the connection profile and preset its turns use.

The writer is stored on the card, where SillyTavern-compatible cards keep extensions, so it
travels with an exported card and SillyTavern keeps it untouched::

    data.extensions.tavernkit.writer = {"profile": "<profile name>", "preset": "<preset name>"}

Either key may be left out (or ``null``): that part follows the chat as before. A group turn
loads the drafted member's card, so each member speaks through its own writer.

Which connection profile a turn uses, first match wins:

1. the turn's own override (``profile`` of ``POST /chats/{id}/turns``, ``/gen``'s options);
2. the speaking character's writer profile;
3. the user's selection (``PATCH /settings/selections``; none: the embedded model).

Which preset: the writer's preset, else the preset the turn's profile binds, else the
selected one. The writer's preset is a chat-completion preset on a chat-completion
connection and a text-completion preset on a text one.

A writer naming a profile or preset that is not stored (deleted or renamed since) fails the
turn with ``invalid_input`` naming the character, the part and the name: the turn never falls
back silently to another model, which could spend keys the user meant to keep apart. A turn
checks its speaker's writer before it writes anything (:func:`check_writer_usable`): a profile
that is missing or cannot be used (no base URL, a key that is gone), or a preset stored under
neither preset kind, refuses the turn before the user's message is stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tavernkit.errors import ChatTurnError, FormatError, GenerateTaskError, NotFound
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.models.character import Card, Character
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.regex_script import embedded_scripts
from tavernkit.models.samplers import TextGenSettings
from tavernkit.models.state import ChatState
from tavernkit.store.protocol import Store

__all__ = [
    "WRITER_FIELD",
    "Writer",
    "card_writer",
    "check_writer",
    "check_writer_usable",
    "choose_profile",
    "extensions_with_writer",
    "with_writer_preset",
    "writer_of",
]

#: where the writer lives on a card (a field name for errors)
WRITER_FIELD = "data.extensions.tavernkit.writer"


@dataclass(frozen=True)
class Writer:
    """A character's own profile and preset names (``None``: the chat's)."""

    profile: str | None = None
    preset: str | None = None


def _name(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def writer_of(extensions: Mapping[str, Any] | None) -> Writer:
    """The writer a card's ``extensions`` hold; anything not a name there is no choice."""
    ours = (extensions or {}).get("tavernkit")
    raw = ours.get("writer") if isinstance(ours, Mapping) else None
    if not isinstance(raw, Mapping):
        return Writer()
    return Writer(profile=_name(raw.get("profile")), preset=_name(raw.get("preset")))


def check_writer(extensions: Mapping[str, Any]) -> None:
    """Refuse a writer that is not ``{"profile": name|null, "preset": name|null}`` (what a
    card's JSON is checked with before it is stored; the names are checked at the turn)."""
    ours = extensions.get("tavernkit")
    if ours is None:
        return
    if not isinstance(ours, Mapping):
        raise FormatError("must be an object", field="data.extensions.tavernkit")
    raw = ours.get("writer")
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        raise FormatError("must be an object", field=WRITER_FIELD)
    for key, value in raw.items():
        if key not in ("profile", "preset"):
            raise FormatError("a writer names only a profile and a preset", field=WRITER_FIELD)
        if value is not None and not isinstance(value, str):
            raise FormatError("must be a name or null", field=f"{WRITER_FIELD}.{key}")


def card_writer(card: Card | None) -> Writer:
    return writer_of(card.data.extensions) if card is not None else Writer()


def extensions_with_writer(extensions: Mapping[str, Any], writer: Writer) -> dict[str, Any]:
    """A copy of ``extensions`` holding ``writer`` (an empty writer removes the key, so a
    card without one stays as SillyTavern wrote it)."""
    out = dict(extensions)
    ours = dict(out.get("tavernkit") or {}) if isinstance(out.get("tavernkit"), Mapping) else {}
    if writer.profile or writer.preset:
        ours["writer"] = {"profile": writer.profile, "preset": writer.preset}
    else:
        ours.pop("writer", None)
    if ours:
        out["tavernkit"] = ours
    else:
        out.pop("tavernkit", None)
    return out


def _missing(state: ChatState, part: str, kind: str, name: str) -> ChatTurnError:
    who = state.card.data.name if state.card is not None else ""
    return _writer_error(who, part, kind, name, "which is not stored")


def _writer_error(who: str, part: str, kind: str, name: str, why: str) -> ChatTurnError:
    return ChatTurnError(
        "invalid_input",
        f"the writer of character {who!r} names {kind} {name!r}, {why}: choose "
        "another in the character's editor (Writer)",
        details={"field": f"{WRITER_FIELD}.{part}", "value": name, "character": who},
    )


#: resolves a connection profile as a turn would (:meth:`~tavernkit.chat.deps.TurnDeps.resolve`)
ResolveProfile = Callable[[ConnectionProfile], Awaitable[ResolvedConnection]]


async def check_writer_usable(
    store: Store, character: Character | None, resolve: ResolveProfile, *, owner: str
) -> None:
    """Refuse, before a turn writes anything, a writer on ``character`` (a card's ``data``)
    the turn could not use:
    a profile that is not stored, or that does not resolve (no base URL, a stored key that
    is gone), or a preset stored as neither a chat-completion nor a text-completion preset.
    The :class:`~tavernkit.errors.ChatTurnError` (``invalid_input``) names the character, the
    part and the name, as the turn's own failure would."""
    if character is None:
        return
    writer, who = writer_of(character.extensions), character.name
    if writer.profile:
        await _check_profile(store, who, writer.profile, resolve, owner=owner)
    if writer.preset:
        for kind in ("chat_preset", "textgen_preset"):
            try:
                await store.get_shared_record(kind, writer.preset, owner=owner)
            except NotFound:
                continue
            return
        raise _writer_error(who, "preset", "preset", writer.preset, "which is not stored")


async def _check_profile(
    store: Store, who: str, name: str, resolve: ResolveProfile, *, owner: str
) -> None:
    try:
        profile = await store.get("connection_profile", name, owner=owner)
    except NotFound:
        raise _writer_error(
            who, "profile", "connection profile", name, "which is not stored"
        ) from None
    if not isinstance(profile, ConnectionProfile):
        raise _writer_error(who, "profile", "connection profile", name, "which is not one")
    try:
        await resolve(profile)
    except (GenerateTaskError, NotFound) as exc:
        # the profile names no base URL for its source, or a key record deleted since
        why = "which cannot be used as stored"
        raise _writer_error(who, "profile", "connection profile", name, why) from exc


async def choose_profile(
    store: Store, state: ChatState, override: str | None, *, owner: str
) -> ChatState:
    """``state`` with the turn's connection profile: ``override``, else the character's
    writer profile, else the selection ``state`` was loaded with (see the module docstring)."""
    name = override or card_writer(state.card).profile
    if not name:
        return state
    try:
        profile = await store.get("connection_profile", name, owner=owner)
    except NotFound:
        if not override:
            raise _missing(state, "profile", "connection profile", name) from None
        raise ChatTurnError(
            "invalid_input",
            f"no connection profile named {name!r}",
            details={"field": "profile", "value": name},
        ) from None
    if not isinstance(profile, ConnectionProfile):
        return state
    return state.model_copy(update={"profile": profile})


async def with_writer_preset(
    store: Store, state: ChatState, connection: ResolvedConnection, *, owner: str
) -> ChatState:
    """``state`` with the character's writer preset in place of the chat's, when it names
    one: a chat-completion preset on a chat connection, a text-completion one otherwise."""
    name = card_writer(state.card).preset
    if not name:
        return state
    chat = connection.family == "chat"
    kind = "chat_preset" if chat else "textgen_preset"
    label = "chat-completion preset" if chat else "text-completion preset"
    try:
        found = await store.get_shared_record(kind, name, owner=owner)
    except NotFound:
        raise _missing(state, "preset", label, name) from None
    if chat and isinstance(found.model, ChatCompletionPreset):
        scripts = embedded_scripts((found.model.model_extra or {}).get("extensions"))
        # its regex scripts run when the preset is allowed: the allow list names record ids
        return state.model_copy(
            update={"chat_preset": found.model, "chat_preset_id": found.id if scripts else None}
        )
    if not chat and isinstance(found.model, TextGenSettings):
        return state.model_copy(
            update={"textgen_preset": found.model, "textgen_preset_id": found.id}
        )
    raise _missing(state, "preset", label, name)
