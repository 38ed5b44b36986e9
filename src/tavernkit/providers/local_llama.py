"""The embedded offline model: llama.cpp in process through ``xllamacpp``, behind the same
interface as :class:`~tavernkit.providers.provider.Provider` (``stream`` / ``complete``).

- A :class:`ChatPrompt` goes through the GGUF's own chat template (chat completions): the chat
  family, the default. A :class:`TextPrompt` (an instruct template folded the prompt) is a raw
  completion: the text family. The request body is built by
  :func:`~tavernkit.providers.local_call.build_call`.
- JSON output is constrained by llama.cpp itself: a JSON schema, any JSON, or a text prompt's
  own GBNF grammar.
- Each generation runs ``Server.handle_*`` on a worker thread (llama.cpp releases the GIL); its
  stream callback hands events to the event loop with ``call_soon_threadsafe``. One loaded model
  (:class:`~tavernkit.providers.local_engine.LocalEngine`) serves several chats at once, one
  slot each, reusing each chat's KV cache across turns.
- **Stop.** An abort or a cancelled task returns control at once, even while llama.cpp is still
  evaluating the prompt: the worker's stop flag is set, everything it produces afterwards is
  dropped (never streamed later), and its callback returns True at the next token or prompt
  batch, which ends the decode and frees the slot.
- **Seeds.** A request without a seed samples with a fresh random seed (swipes and regenerate
  differ); the request's seed, else ``seed`` here, makes a generation reproducible.
- Errors follow ``Provider``'s rule: a failure before the first event is raised, one after it
  is the stream's last event (``StreamInterrupted``), an abort ends with ``Finish("aborted")``.
- With a reasoning template and a profile whose reasoning format is ``tags``, ``<think>``
  blocks are split off as reasoning while the reply streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tavernkit.errors import BadRequest, ContextTooLong, ProviderError, StreamInterrupted
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.events import (
    Finish,
    FinishReason,
    ProviderErrorEvent,
    ResponseMeta,
    StreamEvent,
    TextDelta,
    Usage,
)
from tavernkit.providers.http import AbortLike
from tavernkit.providers.local_call import LOCAL_MODEL_NAME, LocalCall, build_call
from tavernkit.providers.local_engine import LocalEngine
from tavernkit.providers.local_slots import prompt_print
from tavernkit.providers.profiles import ModelProfile, resolve_model
from tavernkit.providers.reasoning_stream import Delimiters, split_tag_reasoning
from tavernkit.providers.request import PromptRequest
from tavernkit.providers.retry import RetryPolicy, accumulate

__all__ = ["LocalLlamaProvider", "build_call"]

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length"}


class _Done:
    pass


_DONE = _Done()
_RAISED: Mapping[str, Any] = {"error": "raised"}


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


_Item = list[StreamEvent] | _Failed | _Done


@dataclass
class LocalLlamaProvider:
    """An in-process llama.cpp model with ``Provider``'s ``stream`` / ``complete``.

    ``engine`` is the loaded model (made from ``model_path``, ``n_ctx`` per slot, ``slots``
    and the thread counts when not given); :meth:`with_options` shares it. ``seed`` is used
    when a request sets none; ``None`` (the default) samples randomly per generation.
    """

    name: str = "local"
    model_path: Path | str | None = None
    model: str = LOCAL_MODEL_NAME
    n_ctx: int = 4096
    slots: int = 2
    n_threads: int | None = None
    seed: int | None = None
    max_tokens: int = 512
    profile: ModelProfile | None = None
    reasoning_template: Delimiters | None = None
    engine: LocalEngine | None = None
    #: decodes stopped but not yet finished inside llama.cpp (they end at their next callback)
    _draining: set[threading.Thread] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        if self.engine is None:
            self.engine = LocalEngine(
                self.model_path,
                n_ctx=self.n_ctx,
                slots=self.slots,
                n_threads=self.n_threads,
                name=self.name,
                model=self.model,
            )

    def load(self) -> Any:
        """The ``xllamacpp.Server``, loaded on first use (blocking: call it from a thread, as
        :meth:`stream` does)."""
        assert self.engine is not None
        return self.engine.server()

    def _profile(self, profile: ModelProfile | None) -> ModelProfile:
        return profile or self.profile or resolve_model("local", self.model)

    async def stream(
        self,
        request: PromptRequest,
        *,
        model: str | None = None,
        profile: ModelProfile | None = None,
        stream: bool = True,
        abort: AbortLike | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Generate a reply to ``request`` as events. ``model`` and ``stream`` exist for
        ``Provider`` compatibility: there is one model, and it always streams internally."""
        events = self._generate(request, abort)
        template = self.reasoning_template
        if template is not None and self._profile(profile).reasoning_format == "tags":
            events = split_tag_reasoning(events, template)
        async with contextlib.aclosing(events) as running:
            async for event in running:
                yield event

    async def complete(
        self,
        request: PromptRequest,
        *,
        model: str | None = None,
        profile: ModelProfile | None = None,
        stream: bool = False,
        abort: AbortLike | None = None,
        retry: RetryPolicy | None = None,
    ) -> Completion:
        """The accumulated result of :meth:`stream`."""
        return await accumulate(
            lambda: self.stream(request, model=model, profile=profile, abort=abort), retry
        )

    def draining(self) -> int:
        """How many stopped decodes are still winding down inside llama.cpp."""
        return sum(1 for t in tuple(self._draining) if t.is_alive())

    async def _generate(
        self, request: PromptRequest, abort: AbortLike | None
    ) -> AsyncGenerator[StreamEvent, None]:
        call = build_call(request, default_max_tokens=self.max_tokens)
        if "seed" not in call.body and self.seed is not None:
            call.body["seed"] = self.seed
        if abort is not None and abort.is_set():
            yield Finish("aborted")
            return
        server = await _first(asyncio.to_thread(self.load), abort)
        if server is None:
            yield Finish("aborted")
            return
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        stop = threading.Event()

        def put(item: _Item) -> None:
            if stop.is_set():  # abandoned: nothing of it is ever streamed
                return
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens
                loop.call_soon_threadsafe(queue.put_nowait, item)

        worker = threading.Thread(
            target=self._work, args=(server, call, stop, put), name="tavernkit-local"
        )
        worker.start()
        delivered = False
        try:
            while True:
                item = await _first(queue.get(), abort)
                if item is None:  # aborted
                    yield Finish("aborted")
                    return
                if isinstance(item, _Done):
                    return
                if isinstance(item, _Failed):
                    error = self._classify(item.error)
                    if not delivered:
                        raise error
                    yield ProviderErrorEvent(
                        StreamInterrupted(
                            f"generation failed after output began: {error.reason}",
                            cause=error,
                            provider=self.name,
                            model=self.model,
                        )
                    )
                    return
                for event in item:
                    delivered = True
                    yield event
        finally:
            # Never wait for the decode here: control goes back now. The flag makes the
            # worker's callback return True (ending the decode) and drops its later output.
            stop.set()
            if worker.is_alive():
                self._draining.add(worker)
            self._draining.difference_update([t for t in tuple(self._draining) if not t.is_alive()])

    def _work(
        self,
        server: Any,
        call: LocalCall,
        stop: threading.Event,
        put: Callable[[_Item], None],
    ) -> None:
        try:
            if not stop.is_set():
                self._run(server, call, stop, put)
        except BaseException as exc:
            put(_Failed(exc))
        finally:
            put(_DONE)

    def _run(
        self,
        server: Any,
        call: LocalCall,
        stop: threading.Event,
        put: Callable[[_Item], None],
    ) -> None:
        body = {
            **call.body,
            "stream": True,
            "stream_options": {"include_usage": True},
            "cache_prompt": True,
            # progress chunks during prompt evaluation let a stop end it at the next batch
            "return_progress": True,
        }
        state = _StreamState(self.model, call.kind == "chat")
        assert self.engine is not None
        router = self.engine.router
        shape = prompt_print(call.kind, call.body)
        claim = router.claim(shape)
        if claim.id_slot >= 0:
            body["id_slot"] = claim.id_slot

        def on_chunk(chunk: Any) -> bool:
            if stop.is_set():
                return True
            try:
                events = state.feed(chunk)
            except Exception as exc:  # xllamacpp swallows a callback's exception: keep it
                state.error = self._classify(exc)
            if state.error is not None:
                return True
            if events:
                put(events)
            return stop.is_set()

        handle = (
            server.handle_chat_completions if call.kind == "chat" else server.handle_completions
        )
        result: Any = _RAISED
        try:
            result = handle(body, on_chunk)
        finally:
            # refused (or raised), the slot may hold what it held before: not known
            refused = isinstance(result, Mapping) and "error" in result
            router.release(claim, None if refused else shape, "".join(state.pieces))
        if isinstance(result, Mapping) and "error" in result:  # refused before streaming
            state.feed(result)
        if state.error is not None:
            raise state.error
        if stop.is_set():
            return
        if state.finish is None:
            # a decode that ended on its own always says why; without it the stream broke
            raise ProviderError(
                "llama.cpp ended the stream without a finish reason",
                provider=self.name,
                model=self.model,
            )
        put(state.tail())

    def _classify(self, exc: BaseException) -> ProviderError:
        if isinstance(exc, ProviderError):
            return exc
        message = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ValueError | TypeError):
            return BadRequest(message, provider=self.name, model=self.model)
        return ProviderError(message, provider=self.name, model=self.model)

    def with_options(self, **changes: Any) -> LocalLlamaProvider:
        """A provider sharing this one's loaded model with other settings (a different seed,
        reasoning template or profile)."""
        changes.setdefault("engine", self.engine)
        clone = replace(self, **changes)
        clone._draining = self._draining
        return clone


class _StreamState:
    """llama.cpp stream chunks -> events, on the worker thread. The response id is held until
    there is text to send, so a failure before any output is still raised, not streamed."""

    def __init__(self, model: str, chat: bool) -> None:
        self.model = model
        self.chat = chat
        self.meta: ResponseMeta | None = None
        self.meta_sent = False
        self.finish: Finish | None = None
        self.usage: Usage | None = None
        self.error: ProviderError | None = None
        self.pieces: list[str] = []  # the generated text, for the slot router

    def feed(self, chunk: Any) -> list[StreamEvent]:
        if not isinstance(chunk, Mapping):
            return []
        if "error" in chunk:
            self.error = _error(chunk["error"], self.model)
            return []
        if self.meta is None and not self.meta_sent:
            self.meta = ResponseMeta(chunk.get("id"), self.model)
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            piece = (choice.get("delta") or {}).get("content") if self.chat else choice.get("text")
            if piece:
                self.pieces.append(piece)
                events.append(TextDelta(piece))
            raw = choice.get("finish_reason")
            if raw:
                self.finish = Finish(_FINISH.get(raw, "other"), raw)
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
            raw = dict(usage)
            if isinstance(chunk.get("timings"), Mapping):
                # llama.cpp's own: prompt_n tokens evaluated in prompt_ms, cache_n reused
                raw["timings"] = dict(chunk["timings"])
            self.usage = Usage(
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
                total_tokens=usage.get("total_tokens"),
                cached_input_tokens=cached,
                raw=raw,
            )
        if events and self.meta is not None:
            events.insert(0, self.meta)
            self.meta, self.meta_sent = None, True
        return events

    def tail(self) -> list[StreamEvent]:
        events: list[StreamEvent] = [self.meta] if self.meta is not None else []
        if self.finish is not None:
            events.append(self.finish)
        if self.usage is not None:
            events.append(self.usage)
        return events


def _error(raw: Any, model: str) -> ProviderError:
    """llama.cpp's OpenAI-style error object as our typed error."""
    info: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {"message": str(raw)}
    message = str(info.get("message") or "llama.cpp refused the request")
    kind = info.get("type")
    if kind == "exceed_context_size_error":
        return ContextTooLong(
            message,
            n_prompt=_int(info.get("n_prompt_tokens")),
            n_ctx=_int(info.get("n_ctx")),
            provider="local",
            model=model,
        )
    if kind == "invalid_request_error" or info.get("code") == 400:
        return BadRequest(message, provider="local", model=model)
    return ProviderError(message, provider="local", model=model)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None


async def _first(work: Any, abort: AbortLike | None) -> Any:
    """The result of ``work`` (an awaitable), or ``None`` when ``abort`` fired first (``work``
    is then cancelled; a thread behind it finishes on its own)."""
    task: asyncio.Future[Any] = asyncio.ensure_future(work)
    if abort is None:
        return await task
    if abort.is_set():
        task.cancel()
        return None
    stop = asyncio.ensure_future(abort.wait())
    try:
        done, _ = await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        stop.cancel()
    if task in done:
        return task.result()
    task.cancel()
    return None
