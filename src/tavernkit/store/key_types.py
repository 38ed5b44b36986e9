"""The values the :class:`~tavernkit.store.protocol.Store` speaks about API keys: a key as
list calls show it (:class:`ApiKeyInfo`, never its secret) and a key's pool bookkeeping
(:class:`KeyState`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["ApiKeyInfo", "KeyState"]


@dataclass(frozen=True, slots=True)
class ApiKeyInfo:
    """An API key as list calls show it. There is deliberately no field that holds the secret or
    any part of it; ``fingerprint`` (a short hash) only tells two keys apart."""

    id: str
    provider: str
    label: str
    fingerprint: str
    created: datetime


@dataclass(frozen=True, slots=True)
class KeyState:
    """Key-pool bookkeeping for one credential (no secret here): its own (``model=""``: its
    uses and last use), or its rest for one model (``uses`` is then unused)."""

    key_id: str
    model: str = ""
    cooldown_until: datetime | None = None
    failures: int = 0
    last_error_code: str | None = None
    last_used: datetime | None = None
    #: successful uses (the pool's least-used-first order)
    uses: int = 0
