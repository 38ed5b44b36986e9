"""The bundled demo character (Wren, the lighthouse keeper): what ``tavernkit chat`` starts
with, what the web UI's "add the demo character" button imports, and what ``tavernkit serve``
puts in an empty library on its first start, so that a fresh install has someone to talk to
(the facade's ``/v1/models`` lists it as ``character/Wren``).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from tavernkit.errors import Conflict

if TYPE_CHECKING:
    from tavernkit.facade import Tavern
    from tavernkit.library_results import ImportResult

__all__ = ["DEMO_CHARACTER", "add_demo_character", "add_demo_on_first_start"]

DEMO_CHARACTER = "Wren"
_CARD = "wren.json"


async def add_demo_character(tk: Tavern) -> ImportResult:
    """Import the demo card into ``tk``'s owner's library (unchanged when it is already
    there); what the import says of its character."""
    data = (resources.files("tavernkit.data") / _CARD).read_bytes()
    found = await tk.library.import_bytes(data, source=_CARD)
    return next(r for r in found if r.kind == "character")


async def add_demo_on_first_start(tk: Tavern) -> ImportResult | None:
    """On a first start (the owner has stored no settings yet) with an empty library, the
    demo character; ``None`` otherwise. The settings are stored then, so a later start is
    not a first one: a user who deletes Wren does not find it back after a restart."""
    store, owner = tk.store, tk.owner
    if await store.get_settings(owner=owner) is not None:
        return None
    if await store.list("character", owner=owner):
        return None
    try:
        record = await add_demo_character(tk)
    except Conflict:
        # processes starting at once on one new database each found the library empty: the
        # first one's Wren is the one (its name is taken), and this process starts without it
        return None
    await store.put_settings(await tk.settings(), owner=owner)
    return record
