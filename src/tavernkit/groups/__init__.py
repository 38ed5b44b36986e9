"""Group chats: SillyTavern group files, who replies to a turn, and a member's prompt.

- :mod:`tavernkit.models.group`: :class:`Group` (the group file) and resolved members;
- :mod:`tavernkit.groups.selection`: the activation strategies (natural, list, manual,
  pooled) and the special generation types, with an injectable RNG;
- :mod:`tavernkit.groups.rng`: mulberry32, the generator SillyTavern's recordings use;
- :mod:`tavernkit.groups.prompt`: the prompt context of a drafted member;
- :mod:`tavernkit.formats.groups`: import and export of group files and group chats.
"""

from __future__ import annotations

from tavernkit.groups.rng import Mulberry32
from tavernkit.groups.selection import SelectionRequest, select_speakers
from tavernkit.models.group import (
    ActivationStrategy,
    GenerationMode,
    Group,
    GroupMember,
    resolve_members,
)

__all__ = [
    "ActivationStrategy",
    "GenerationMode",
    "Group",
    "GroupMember",
    "Mulberry32",
    "SelectionRequest",
    "resolve_members",
    "select_speakers",
]
