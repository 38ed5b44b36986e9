"""The chat turn's runner: one reply from a plan of attempts (key pool, fallback chain), with
retries, continuation after a broken stream, tool rounds and an optional review.

The face (each name imported on first use, so ``generation.abort`` stays light):

- :func:`run_turn` (:mod:`.turn`) runs one turn; :class:`TurnOptions` (:mod:`.options`) says
  how; :class:`TurnResult` / :class:`TurnError` (:mod:`.result`) say what happened;
- :class:`Plan` (:mod:`.plan`) is the ordered attempts; :class:`KeyPool` and the cooldown
  stores (:mod:`.keys`) rotate keys, and turn a provider's ``Retry-After`` into a cooldown
  (``CooldownPolicy``);
- :class:`ResponseSink` and its events (:mod:`.sink`) are where a reply's text goes;
- :class:`AbortController` / :class:`AbortSignal` (:mod:`.abort`) stop a turn;
- :func:`resolve_connection` (:mod:`.profiles`) turns a connection profile into a provider.

One attempt's own pieces are :mod:`.attempt`: its prompt shaped for its model
(``chat_prompt``, ``text_prompt``), how its provider sends (``sending``), its log line
(``log``) and the one-request plan of tasks and the request API (``one_request``). Across
attempts: :mod:`.continuation`, :mod:`.tool_replay`, :mod:`.review`, :mod:`.delivery`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavernkit._lazy_face import lazy_face

if TYPE_CHECKING:
    from tavernkit.generation.abort import (
        AbortController,
        AbortSignal,
        ActiveGenerations,
        StreamingProcessor,
    )
    from tavernkit.generation.keys import (
        CooldownPolicy,
        CooldownStore,
        InMemoryCooldownStore,
        KeyPool,
        PoolKey,
        StoreCooldownStore,
    )
    from tavernkit.generation.options import BeforeRequest, Observe, TurnOptions
    from tavernkit.generation.plan import Attempt, Plan, PlanEntry, TurnContext
    from tavernkit.generation.profiles import ResolvedConnection, resolve_connection
    from tavernkit.generation.result import (
        AttemptRecord,
        FallbackNotice,
        TurnError,
        TurnResult,
        classify_error,
    )
    from tavernkit.generation.sink import (
        ConsoleSink,
        ErrorEvent,
        NoticeEvent,
        RecordingSink,
        ResponseSink,
        SinkEvent,
        ToolEvent,
    )
    from tavernkit.generation.turn import run_turn

#: name -> the module that defines it, imported when the name is first read
_LAZY: dict[str, str] = {
    "AbortController": "tavernkit.generation.abort",
    "AbortSignal": "tavernkit.generation.abort",
    "ActiveGenerations": "tavernkit.generation.abort",
    "Attempt": "tavernkit.generation.plan",
    "AttemptRecord": "tavernkit.generation.result",
    "BeforeRequest": "tavernkit.generation.options",
    "ConsoleSink": "tavernkit.generation.sink",
    "CooldownPolicy": "tavernkit.generation.keys",
    "CooldownStore": "tavernkit.generation.keys",
    "ErrorEvent": "tavernkit.generation.sink",
    "FallbackNotice": "tavernkit.generation.result",
    "InMemoryCooldownStore": "tavernkit.generation.keys",
    "KeyPool": "tavernkit.generation.keys",
    "NoticeEvent": "tavernkit.generation.sink",
    "Observe": "tavernkit.generation.options",
    "Plan": "tavernkit.generation.plan",
    "PlanEntry": "tavernkit.generation.plan",
    "PoolKey": "tavernkit.generation.keys",
    "RecordingSink": "tavernkit.generation.sink",
    "ResolvedConnection": "tavernkit.generation.profiles",
    "ResponseSink": "tavernkit.generation.sink",
    "SinkEvent": "tavernkit.generation.sink",
    "StoreCooldownStore": "tavernkit.generation.keys",
    "StreamingProcessor": "tavernkit.generation.abort",
    "ToolEvent": "tavernkit.generation.sink",
    "TurnContext": "tavernkit.generation.plan",
    "TurnError": "tavernkit.generation.result",
    "TurnOptions": "tavernkit.generation.options",
    "TurnResult": "tavernkit.generation.result",
    "classify_error": "tavernkit.generation.result",
    "resolve_connection": "tavernkit.generation.profiles",
    "run_turn": "tavernkit.generation.turn",
}

__all__ = [
    "AbortController",
    "AbortSignal",
    "ActiveGenerations",
    "Attempt",
    "AttemptRecord",
    "BeforeRequest",
    "ConsoleSink",
    "CooldownPolicy",
    "CooldownStore",
    "ErrorEvent",
    "FallbackNotice",
    "InMemoryCooldownStore",
    "KeyPool",
    "NoticeEvent",
    "Observe",
    "Plan",
    "PlanEntry",
    "PoolKey",
    "RecordingSink",
    "ResolvedConnection",
    "ResponseSink",
    "SinkEvent",
    "StoreCooldownStore",
    "StreamingProcessor",
    "ToolEvent",
    "TurnContext",
    "TurnError",
    "TurnOptions",
    "TurnResult",
    "classify_error",
    "resolve_connection",
    "run_turn",
]

__getattr__, __dir__ = lazy_face("tavernkit.generation", globals(), _LAZY)
