"""Options of one turn (what the chat service or ``generate_task`` passes to ``run_turn``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tavernkit.generation.continuation import ContinuationConfig
from tavernkit.generation.review import ReviewConfig
from tavernkit.providers.events import StreamEvent
from tavernkit.providers.request import PromptRequest
from tavernkit.providers.retry import RetryPolicy
from tavernkit.tools.registry import FunctionTool

__all__ = ["DEFAULT_TOOLS_RAN_DIRECTIVE", "BeforeRequest", "Observe", "TurnOptions"]

#: may replace the outgoing request (``None``: send it unchanged); gets ``(request, stream)``
BeforeRequest = Callable[[PromptRequest, bool], "PromptRequest | None"]
#: sees every provider event; may be a coroutine function
Observe = Callable[[StreamEvent], "Awaitable[None] | None"]

DEFAULT_TOOLS_RAN_DIRECTIVE = (
    "These tools already ran during this reply; their results are final and they must not "
    "be called again for the same arguments:\n{tools}"
)


@dataclass(frozen=True)
class TurnOptions:
    stream: bool = True
    #: "clause" (default): shown as it arrives, carried up to the last clause (a failed
    #: attempt's unfinished clause is taken back); "delta": shown and carried as it arrives
    segment: Literal["clause", "delta"] = "clause"
    continuation: ContinuationConfig = field(default_factory=ContinuationConfig)
    char_name: str = ""
    #: the text this reply continues (``continue_``): the model's leading echo of it is
    #: stripped, byte for byte, with the matcher used for carried text
    continues: str = ""
    #: speaker labels that must not start the reply (the user's names)
    user_names: tuple[str, ...] = ()
    tools: Sequence[FunctionTool] | Mapping[str, FunctionTool] = ()
    max_tool_rounds: int = 5
    tool_timeout: float | None = 60.0
    tools_ran_directive: str = DEFAULT_TOOLS_RAN_DIRECTIVE
    default_reserve: int = 1024
    review: ReviewConfig | None = None
    turn_id: str = "-"
    #: same-request retries before the first event (the provider's retry policy); ``None``:
    #: none, failures go straight to the next key or attempt
    retry: RetryPolicy | None = None
    #: sees (and may replace) every outgoing request with its stream flag
    before_request: BeforeRequest | None = None
    #: every provider event as it arrives (a live view; may be a coroutine function)
    observe: Observe | None = None
