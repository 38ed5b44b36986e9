"""A chat's Author's Note: read and change the ``note_*`` fields of its ``chat_metadata``
(SillyTavern's ``note_prompt``, ``note_interval``, ``note_depth``, ``note_position``,
``note_role``), which the prompt builders already read every turn
(:attr:`~tavernkit.prompt.state.PromptState.note`).

Values are checked before anything is written: a bad depth, frequency, role or position is a
:class:`~tavernkit.errors.FormatError` naming the field, and the stored note is unchanged.
"""

from __future__ import annotations

from tavernkit.chat.chat_metadata import chat_metadata
from tavernkit.errors import FormatError
from tavernkit.prompt.state import AuthorsNote, ExtensionPosition
from tavernkit.store.protocol import Store

__all__ = ["NOTE_POSITIONS", "NOTE_ROLES", "authors_note", "set_authors_note"]

#: role name -> SillyTavern's number (``extension_prompt_roles``)
NOTE_ROLES: dict[str, int] = {"system": 0, "user": 1, "assistant": 2}
#: position name -> SillyTavern's number (``extension_prompt_types``)
NOTE_POSITIONS: dict[str, int] = {
    "after_story": ExtensionPosition.IN_PROMPT,
    "in_chat": ExtensionPosition.IN_CHAT,
    "before_story": ExtensionPosition.BEFORE_PROMPT,
    "off": ExtensionPosition.NONE,
}


async def authors_note(store: Store, chat_id: str, *, owner: str) -> AuthorsNote:
    """The chat's note as the prompt builders read it (SillyTavern's defaults filled in)."""
    return AuthorsNote.from_metadata((await chat_metadata(store, chat_id, owner=owner))[1])


async def set_authors_note(
    store: Store,
    chat_id: str,
    *,
    owner: str,
    text: str | None = None,
    depth: int | None = None,
    interval: int | None = None,
    role: int | None = None,
    position: int | None = None,
) -> AuthorsNote:
    """Change the given fields of the chat's note (``None`` keeps one); returns the note.
    ``interval`` is SillyTavern's frequency: the note goes in every ``interval``-th user
    message, 0 never."""
    checks = (
        ("note_depth", depth, depth is not None and depth < 0, "must be 0 or more"),
        ("note_interval", interval, interval is not None and interval < 0, "must be 0 or more"),
        ("note_role", role, role is not None and role not in NOTE_ROLES.values(), "0, 1 or 2"),
        (
            "note_position",
            position,
            position is not None and position not in NOTE_POSITIONS.values(),
            "-1, 0, 1 or 2",
        ),
    )
    for field, value, bad, rule in checks:
        if bad:
            raise FormatError(f"{value!r} is not allowed ({rule})", field=field)
    chat_id, metadata = await chat_metadata(store, chat_id, owner=owner)  # a name works too
    if text is not None:
        metadata.note_prompt = text
    if depth is not None:
        metadata.note_depth = depth
    if interval is not None:
        metadata.note_interval = interval
    if role is not None:
        metadata.note_role = role
    if position is not None:
        metadata.note_position = position
    await store.update_chat_metadata(chat_id, metadata.to_wire(), owner=owner)
    return AuthorsNote.from_metadata(metadata)
