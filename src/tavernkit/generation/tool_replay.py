"""Tool calls across the attempts of one turn.

Failover never rolls back a tool's side effects, so a replacement attempt must not repeat
them: every successful call is recorded by its identity (sha256 of the name and the canonical
arguments; provider call ids and key order are ignored), and a later attempt that asks for
an identical call gets the recorded result instead of running it again. Within one attempt a
tool may be called twice on purpose (dice, the time), so an attempt's own calls join the
record only when the attempt ends.

With response review on, proposed calls pass a pre-execution checkpoint first; a rejection
lasts for the whole turn (an identical proposal later is refused without asking again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tavernkit.generation.review import ProposedCall, ToolCheckpoint
from tavernkit.generation.sink import ToolEvent
from tavernkit.providers.accumulator import WireToolCall
from tavernkit.providers.http import AbortLike
from tavernkit.tools.calls import coerce_tool_call
from tavernkit.tools.errors import ToolCallParseError
from tavernkit.tools.identity import call_identity
from tavernkit.tools.loop import InvocationRecord, execute_tool_calls
from tavernkit.tools.registry import FunctionTool

__all__ = ["ToolReplay"]

_REJECTED = "Error: this tool call was rejected by review and was not run."


def _error_record(
    call: WireToolCall, identity: str, round_no: int, result: str
) -> InvocationRecord:
    return InvocationRecord(
        id=call.id or f"call_{round_no}_{call.index}",
        name=call.name,
        display_name=call.name,
        parameters=call.arguments,
        args={},
        result=result,
        error=True,
        display_text=call.name,
        identity=identity,
        round=round_no,
    )


class ToolReplay:
    def __init__(
        self,
        tools: Mapping[str, FunctionTool],
        *,
        timeout: float | None,
        abort: AbortLike | None,
        emit: Callable[[ToolEvent], None],
        checkpoint: ToolCheckpoint | None = None,
        rejections: dict[str, str] | None = None,
    ) -> None:
        self.tools = tools
        self.timeout = timeout
        self.abort = abort
        self.emit = emit
        self.checkpoint = checkpoint
        self.rejections = rejections if rejections is not None else {}
        self.completed: dict[str, InvocationRecord] = {}
        self.replayed = 0

    def remember(self, records: Sequence[InvocationRecord]) -> None:
        """An attempt ended: its successful calls may now be replayed by later attempts."""
        for record in records:
            if not record.error:
                self.completed.setdefault(record.identity, record)

    def summary(self) -> str:
        return "\n".join(
            f"- {r.name}({r.parameters}) -> {r.result[:500]}" for r in self.completed.values()
        )

    async def run_round(
        self, calls: Sequence[WireToolCall], round_no: int
    ) -> list[InvocationRecord]:
        """One reply's calls, in order: replayed, refused, or run."""
        slots: list[InvocationRecord | None] = []
        pending: list[tuple[int, Any]] = []
        seen: set[tuple[str, str]] = set()
        for index, raw in enumerate(calls):
            try:
                call = coerce_tool_call(raw, index)
            except ToolCallParseError as exc:
                identity = call_identity(raw.name, raw.arguments)
                slots.append(_error_record(raw, identity, round_no, f"Error: {exc.message}"))
                continue
            identity = call.identity
            if call.id and (call.id, identity) in seen:
                continue  # the same call reported twice in one reply runs once
            seen.add((call.id, identity))
            done = self.completed.get(identity)
            if done is not None:
                self.replayed += 1
                slots.append(replace(done, id=call.id or done.id, round=round_no))
                self.emit(ToolEvent(call.name, done.display_text, replayed=True))
            elif identity in self.rejections:
                slots.append(_error_record(raw, identity, round_no, _REJECTED))
            else:
                slots.append(None)
                pending.append(
                    (len(slots) - 1, (raw, ProposedCall(call.name, call.args, identity)))
                )
        if self.checkpoint is not None and pending:
            verdicts = await self.checkpoint([proposal for _, (_, proposal) in pending])
            kept = []
            for slot, (raw, proposal) in pending:
                if verdicts.get(proposal.identity) == "reject":
                    self.rejections[proposal.identity] = "rejected"
                    slots[slot] = _error_record(raw, proposal.identity, round_no, _REJECTED)
                else:
                    kept.append((slot, (raw, proposal)))
            pending = kept
        for slot, (raw, _) in pending:
            (record,) = await execute_tool_calls(
                [raw], self.tools, round_no=round_no, timeout=self.timeout, abort=self.abort
            )
            slots[slot] = record
            self.emit(ToolEvent(record.name, record.display_text, error=record.error))
        return [s for s in slots if s is not None]
