"""Main-chat tools: which of the Tavern's registered tools a chat turn offers, and how.

SillyTavern's ToolManager semantics, over :class:`~tavernkit.tools.registry.ToolRegistry`:

- a turn offers tools when :func:`~tavernkit.tools.capability.can_perform_tool_calls` says its
  kind may (``normal``, ``swipe``, ``regenerate``; never ``continue``, ``impersonate`` or
  ``quiet``) on a chat-completion profile; each tool's ``should_register`` is asked again for
  every turn, and a tool that says no is left out of that turn's request;
- ``native`` sends them as the request's ``tools`` (``tool_choice="auto"``); an attempt whose
  model has no native tool calling (the primary, or a fallback) gets the same tools through a
  prompt protocol instead (``prompt_xml`` by default, ``prompt_json`` on request): the
  catalogue goes in as a system message, earlier calls and results are rewritten into text,
  the payload is hidden from the stream and read back as tool calls
  (:class:`ProtocolToolProvider`), so the turn runner's tool loop, its bounded rounds and its
  replay by identity work the same either way;
- the runner runs the calls; invocations are stored as their own system message before the
  reply (:mod:`.tool_messages`), stealth ones nowhere.

``function_call_mode`` (``auto``, ``native``, ``prompt_xml``, ``prompt_json``) is the
:class:`~tavernkit.chat.service.ChatService`'s; ``auto`` is native where the attempt's model
supports it and ``prompt_xml`` elsewhere, an explicit protocol is used by every attempt, and an
explicit ``native`` never falls back to a protocol (a model without tools then gets none).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tavernkit.generation.attempt.sending import ProviderWrapper
from tavernkit.generation.plan import AttemptTarget, FundingScope, Plan, PlanEntry
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.providers.events import (
    Finish,
    ProviderErrorEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from tavernkit.providers.http import AbortLike
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt, PromptRequest, ToolSpec
from tavernkit.tools import protocol_for
from tavernkit.tools.calls import ToolCall
from tavernkit.tools.capability import can_perform_tool_calls, is_tool_calling_supported
from tavernkit.tools.errors import ToolCallParseError
from tavernkit.tools.modes import make_trigger_signal, resolve_function_call_mode
from tavernkit.tools.protocol import PromptProtocol
from tavernkit.tools.registry import FunctionTool, ToolRegistry
from tavernkit.tools.scan import StreamDetector

__all__ = ["ChatTools", "ProtocolToolProvider", "offer_tools"]


@dataclass(frozen=True)
class ChatTools:
    """The tools one chat turn offers. ``protocol`` is the text protocol of the attempts
    whose model cannot take native tools (``None``: such attempts get no tools);
    ``forced`` makes every attempt use it (an explicit ``prompt_xml``/``prompt_json``)."""

    tools: tuple[FunctionTool, ...]
    protocol: PromptProtocol | None
    forced: bool = False

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(ToolSpec(t.name, t.description, dict(t.parameters)) for t in self.tools)

    def apply(self, request: PromptRequest) -> PromptRequest:
        """The turn's request with the tools on it (the runner drops them, or the protocol
        provider turns them into text, per attempt)."""
        if not isinstance(request, ChatPrompt):
            return request
        return replace(request, tools=self.specs(), tool_choice="auto")

    def attach(self, plan: Plan) -> None:
        """Make the plan's attempts without native tools (every attempt when ``forced``)
        speak the prompt protocol: their provider is wrapped, and their model profile says
        it takes tools so the runner keeps them on the request for the wrapper to rewrite."""
        protocol = self.protocol
        if protocol is None:
            return
        inner = plan.resolver
        forced = self.forced

        async def resolver(entry: PlanEntry, scope: FundingScope) -> AttemptTarget:
            target = await inner(entry, scope)
            real = target.profile
            if real.supports_tools and not forced:
                return target
            make = target.make_provider

            def make_provider(secret: str | None) -> Provider:
                wrapped = ProtocolToolProvider(make(secret), protocol, real)
                # a wrapper streams the same events as the provider it wraps
                return wrapped  # type: ignore[return-value]

            return replace(
                target,
                make_provider=make_provider,
                profile=replace(real, supports_tools=True),
            )

        plan.resolver = resolver


async def offer_tools(
    registry: ToolRegistry,
    kind: str,
    connection: ResolvedConnection,
    *,
    mode: str = "auto",
    rng: random.Random | None = None,
) -> ChatTools | None:
    """The tools a turn of ``kind`` on ``connection`` offers; ``None`` when it offers none
    (no tool registered or allowed now, a kind or profile that cannot call tools). ``rng``
    draws the protocol's trigger line (injected so tests know it)."""
    if not (len(registry) or registry.has_sources) or connection.family != "chat":
        return None
    caps = connection.capabilities
    if not can_perform_tool_calls(kind, caps, mode):
        return None
    tools = await registry.tools(kind)
    if not tools:
        return None
    resolved = resolve_function_call_mode(
        mode, native_supported=is_tool_calling_supported(caps), force_plain_text=False
    )
    requested = (mode or "auto").strip().lower() or "auto"
    if requested == "native":
        return ChatTools(tuple(tools), None)
    trigger = make_trigger_signal(rng or random.Random())
    protocol_mode = resolved if resolved != "native" else "prompt_xml"
    forced = requested in ("prompt_xml", "prompt_json") or caps.force_plain_text
    return ChatTools(tuple(tools), protocol_for(protocol_mode, trigger), forced=forced)


class ProtocolToolProvider(ProviderWrapper):
    """``inner`` taking native-looking tool requests over a prompt protocol.

    Outgoing: the request's ``tools`` become the protocol's instructions (a system message
    after the leading ones) and are removed; earlier assistant ``tool_calls`` and ``tool``
    results become the protocol's text (with or without tools on this request, so a last
    round without tools still reads the rounds before it). Incoming: the text from the
    trigger line on is held back; at the end it is parsed into ``ToolCallDelta`` events (the
    finish reason becomes ``tool_calls``), or, when it cannot be read, shown after all as
    ordinary text.
    """

    def __init__(self, inner: Any, protocol: PromptProtocol, real_profile: ModelProfile) -> None:
        super().__init__(inner)
        self.protocol = protocol
        self.real_profile = real_profile

    def rewrite(self, request: ChatPrompt) -> ChatPrompt:
        """The request as the protocol sends it."""
        protocol = self.protocol
        messages = request.messages
        plain: list[dict[str, Any]] = [
            {
                "role": m.role,
                "content": m.text(),
                "tool_calls": list(m.tool_calls),
                "tool_call_id": m.tool_call_id,
                "_at": i,
            }
            for i, m in enumerate(messages)
        ]
        rewritten = protocol.rewrite_history(plain)
        if request.tools:
            instructions = protocol.instructions(request.tools, tool_choice=request.tool_choice)
            rewritten = protocol.insert_instructions(rewritten, instructions)
        out: list[ChatMessage] = []
        for item in rewritten:
            at = item.get("_at")
            original = messages[at] if isinstance(at, int) else None
            if original is not None and not original.tool_calls and original.role != "tool":
                out.append(original)  # untouched: keeps its images, name and cache mark
                continue
            name = original.name if original is not None and original.role != "tool" else None
            out.append(ChatMessage(item["role"], str(item.get("content") or ""), name=name))
        return replace(request, messages=tuple(out), tools=(), tool_choice=None)

    def _calls(self, text: str, tools: Sequence[ToolSpec]) -> list[ToolCall] | None:
        try:
            parsed = self.protocol.parse(text, tools, validate=False)
        except ToolCallParseError:
            return None
        return list(parsed.calls)

    async def _stream(
        self,
        request: PromptRequest,
        model: str | None,
        profile: ModelProfile | None,
        stream: bool,
        abort: AbortLike | None,
    ) -> AsyncIterator[StreamEvent]:
        if not isinstance(request, ChatPrompt):
            async for event in self.inner.stream(
                request, model=model, profile=self.real_profile, stream=stream, abort=abort
            ):
                yield event
            return
        offered = request.tools
        detector = self.protocol.detector() if offered else None
        events = self.inner.stream(
            self.rewrite(request),
            model=model,
            profile=self.real_profile,
            stream=stream,
            abort=abort,
        )
        async for event in events:
            if detector is None:
                yield event
            elif isinstance(event, TextDelta):
                shown = detector.feed(event.text)
                if shown:
                    yield TextDelta(shown, event.choice)
            elif isinstance(event, ProviderErrorEvent):
                detector = None  # a cut reply: its unread payload is never shown
                yield event
            elif isinstance(event, Finish):
                released = self._end(detector, offered)
                for out in released:
                    yield out
                detector = None
                called = any(isinstance(out, ToolCallDelta) for out in released)
                yield replace(event, reason="tool_calls") if called else event
            else:
                yield event
        if detector is not None:  # a stream that ended without its finish event
            for out in self._end(detector, offered):
                yield out

    def _end(self, detector: StreamDetector, offered: Sequence[ToolSpec]) -> list[StreamEvent]:
        """What the end of a reply releases: the held tail, then the calls (or the payload
        as text when it cannot be read)."""
        out: list[StreamEvent] = []
        tail = detector.finish()
        if tail:
            out.append(TextDelta(tail))
        if not detector.triggered:
            return out
        calls = self._calls(detector.raw_text, offered)
        if not calls:
            if detector.hidden_text:
                out.append(TextDelta(detector.hidden_text))
            return out
        out += [
            ToolCallDelta(index, id=call.id, name=call.name, arguments_fragment=call.arguments_text)
            for index, call in enumerate(calls)
        ]
        return out
