"""Call identity: which tool calls are "the same call".

Providers give every call a fresh id, and models format the same arguments with different
whitespace and key order, so neither can tell two requests for the same work apart. The
identity is a hash of the tool name and the arguments in canonical JSON, so it is stable
across providers, retries and the two prompt protocols.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["call_identity", "canonical_json"]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace (non-ASCII kept as is, NaN refused)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def call_identity(name: str, args: Any) -> str:
    """sha256 (hex) of the name and the canonical JSON of the arguments; ids are ignored.

    ``args`` given as JSON text is decoded first, so ``'{"a": 1}'`` and ``{"a": 1}`` are
    the same call; text that is not JSON is hashed as the string it is. The name and the
    arguments are separated by a NUL so that no name/argument split can collide.
    """
    if isinstance(args, str | bytes):
        try:
            args = json.loads(args)
        except ValueError:
            args = args.decode("utf-8", "replace") if isinstance(args, bytes) else args
    try:
        body = canonical_json(args)
    except (TypeError, ValueError):
        # NaN or a value JSON cannot hold: fall back to a stable text form
        body = repr(args)
    return hashlib.sha256(f"{name}\x00{body}".encode()).hexdigest()
