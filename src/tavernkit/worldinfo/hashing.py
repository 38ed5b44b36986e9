"""SillyTavern's entry hash: cyrb53 over ``JSON.stringify`` of the entry.

Timed effects (sticky, cooldown) are stored in chat metadata under the hash of the entry's JSON,
so a chat moved between SillyTavern and tavernkit keeps its timers only if the hash is
reproduced exactly: JS key order (integer-like keys first), no spaces, non-ASCII kept, JS number
formatting, and the hash taken over UTF-16 code units.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tavernkit.jscompat import cyrb53, js_json_stringify, js_key_order

# cyrb53 and js_json_stringify live in the shared JS-compat module (``{{pick}}`` seeds with the
# same hash); they stay importable from here, where the world-info API has always named them.
__all__ = ["cyrb53", "entry_hash", "hash_payload", "js_json_stringify"]


def hash_payload(
    entry: Mapping[str, Any], world: str, decorators: list[str], content: str
) -> dict[str, Any]:
    """The object SillyTavern hashes: ``{uid, world, ...rest}`` with ``content`` replaced by
    the decorator-stripped text in place and ``decorators`` set (appended when new)."""
    payload: dict[str, Any] = {}
    if "uid" in entry:
        payload["uid"] = entry["uid"]
    payload["world"] = world
    for key in js_key_order(entry):
        if key != "uid":
            payload[key] = entry[key]
    payload["decorators"] = list(decorators)
    payload["content"] = content
    return payload


def entry_hash(entry: Mapping[str, Any], world: str, decorators: list[str], content: str) -> int:
    return cyrb53(js_json_stringify(hash_payload(entry, world, decorators, content)))
