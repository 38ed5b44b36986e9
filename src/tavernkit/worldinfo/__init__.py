"""World info (lorebook) activation, SillyTavern 1.18-exact and fast.

:func:`scan` takes the books in play, the chat's scan texts (newest first, see
:func:`scan_chat`), the settings and the turn's inputs, and returns a
:class:`WorldInfoResult` with every output position in SillyTavern's order and the chat's new
timed-effects state. It is pure: the same inputs and RNG give the same result, and a dry run
changes no state. Books are compiled once per content and cached in a :class:`WorldInfoEngine`.

Where an activated entry's ``position`` (before/after the card, the examples, the author's
note, ``@depth``, outlets) decides the output it lands in: :mod:`.assemble`; where those
outputs go into the prompt: :mod:`tavernkit.prompt.extensions` and
:func:`tavernkit.prompt.chat_history.inject_prompts` (in-chat depths).

``compat="st-1.18"`` reproduces SillyTavern 1.18 bug for bug (the conformance suite runs this
way). The default mode fixes these SillyTavern behaviours:

1. Inclusion groups: removing an entry a previous group already removed deletes the *last*
   activated entry (``splice(indexOf(e), 1)`` with -1). Default: nothing is removed.
2. Inclusion groups: "group already activated" compares the whole ``group`` string, so an
   entry in ``"a,b"`` does not block group ``a``. Default: any shared group name blocks.
3. Budget: entries that overflowed the budget (or were never reached after it overflowed)
   still count as successful and seed the next delayed-recursion level. Default: they don't.
4. Budget: only content that went into the recursion buffer counts against the budget in
   later loops (``preventRecursion`` entries are free). Default: all activated content counts.
5. Macro substitution: an entry re-activated after overflowing is substituted a second time.
   Default: content is substituted from the original each time.
6. Forced (external) activations sort before all other non-sticky entries (``indexOf`` -1).
   Default: they keep their place in the sorted order.
7. Decorators: content made only of decorator lines is emitted verbatim, decorators included.
   Default: it is empty. (The entry hash is SillyTavern's in both modes, so timed effects stay
   portable.)

In both modes, unlike SillyTavern, an entry whose content is not a string is skipped with a
warning instead of silently emptying the whole scan, and regex keys run under a guard
(:class:`~tavernkit.worldinfo.regex_keys.RegexGuard`): a key that exceeds its time limit does
not match, with a warning. Known residual differences: Unicode tables (``toLowerCase``) follow
Python's Unicode version; ``regress`` matches ``.`` per code point where JS without ``u`` sees
UTF-16 halves, and folds ``\u017f``/``\u212a`` to ``s``/``k`` under ``i`` without ``u`` where JS
does not (word-shaped keys such as ``/\\bdragons?\\b/i`` bypass ``regress`` and follow JS);
keys with macros are substituted once per scan (SillyTavern: once per check, which only
differs for non-deterministic macros in keys).
"""

from __future__ import annotations

from tavernkit.worldinfo.buffer import MAX_SCAN_DEPTH, scan_chat
from tavernkit.worldinfo.compile import CompiledBook, CompiledEntry, compile_book
from tavernkit.worldinfo.decorators import parse_decorators
from tavernkit.worldinfo.explain import EntryReason, WorldInfoExplain
from tavernkit.worldinfo.hashing import cyrb53, entry_hash, js_json_stringify
from tavernkit.worldinfo.index import Book, WorldInfoEngine, default_engine
from tavernkit.worldinfo.regex_keys import RegexGuard, is_risky_pattern, parse_regex_key
from tavernkit.worldinfo.result import (
    ActivatedEntry,
    DepthGroup,
    ExampleEntry,
    WorldInfoResult,
    merge_authors_note,
)
from tavernkit.worldinfo.scan import COMPAT_ST_118, scan
from tavernkit.worldinfo.settings import ScanSettings
from tavernkit.worldinfo.timed import empty_timed_state
from tavernkit.worldinfo.tokens import ByteEstimate, estimate_tokens

__all__ = [
    "COMPAT_ST_118",
    "MAX_SCAN_DEPTH",
    "ActivatedEntry",
    "Book",
    "ByteEstimate",
    "CompiledBook",
    "CompiledEntry",
    "DepthGroup",
    "EntryReason",
    "ExampleEntry",
    "RegexGuard",
    "ScanSettings",
    "WorldInfoEngine",
    "WorldInfoExplain",
    "WorldInfoResult",
    "compile_book",
    "cyrb53",
    "default_engine",
    "empty_timed_state",
    "entry_hash",
    "estimate_tokens",
    "is_risky_pattern",
    "js_json_stringify",
    "merge_authors_note",
    "parse_decorators",
    "parse_regex_key",
    "scan",
    "scan_chat",
]
