"""The embedded offline model: llama-cpp-python in-process, behind the same interface as
:class:`~tavernkit.providers.provider.Provider` (``stream`` / ``complete``).

- A :class:`ChatPrompt` goes through the GGUF's own chat template
  (``create_chat_completion``): the chat family, the default. A :class:`TextPrompt` (an
  instruct template folded the prompt) is a raw completion: the text family.
- JSON output is constrained by a llama.cpp grammar built from the request's JSON schema
  (any JSON when the schema is ``None``); a ``TextPrompt`` may bring its own GBNF.
- Generation runs in a worker thread feeding an asyncio queue, so the event loop never waits
  on the model. The worker checks a stop flag between tokens: an abort or a cancelled task
  stops generation after at most the token in flight. One ``Llama`` serves one generation at
  a time (it keeps its KV cache between calls), so the worker holds a lock.
- Errors follow ``Provider``'s rule: a failure before the first event is raised, one after
  it is the stream's last event (``StreamInterrupted``), an abort ends with
  ``Finish("aborted")``.
- With a reasoning template and a profile whose reasoning format is ``tags``, ``<think>``
  blocks are split off as reasoning while the reply streams.

``llama_cpp`` is imported only when the model is first loaded; without it every call raises
:class:`~tavernkit.providers.local_model.MissingDependency`, naming the ``local`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import re
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

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
from tavernkit.providers.local_model import MissingDependency, require_model_path
from tavernkit.providers.openai_chat import image_placeholder
from tavernkit.providers.profiles import ModelProfile, resolve_model
from tavernkit.providers.reasoning_stream import Delimiters, split_tag_reasoning
from tavernkit.providers.request import (
    ImagePart,
    PromptRequest,
    TextPart,
    TextPrompt,
)
from tavernkit.providers.retry import RetryPolicy, accumulate

__all__ = ["LocalCall", "LocalLlamaProvider", "build_call", "import_llama_cpp"]

LOCAL_MODEL_NAME = "smollm2-135m-instruct"
_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length"}
_CONTEXT = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


def import_llama_cpp() -> ModuleType:
    """``llama_cpp``, or :class:`MissingDependency` naming the extra that provides it."""
    try:
        return importlib.import_module("llama_cpp")
    except ImportError:
        raise MissingDependency("llama-cpp-python", model=LOCAL_MODEL_NAME) from None


GrammarSpec = tuple[Literal["json_schema", "json", "gbnf"], str]


@dataclass(frozen=True, slots=True)
class LocalCall:
    """One request as llama-cpp-python arguments, built without loading anything.

    ``kwargs`` go to ``create_chat_completion`` (``kind="chat"``) or ``create_completion``
    (``kind="text"``); ``grammar`` is compiled by the worker; ``downgrades`` says what the
    model could not take (images), as adapters report in ``WireRequest.downgrades``.
    """

    kind: Literal["chat", "text"]
    kwargs: dict[str, Any]
    grammar: GrammarSpec | None = None
    downgrades: tuple[str, ...] = ()


#: Samplers the 135M model needs to stay coherent, used where the request leaves them unset. A
#: repetition penalty of exactly 1 (SillyTavern's preset default, "off") counts as unset: without
#: a penalty this model loops on one sentence within a few lines; send e.g. 1.0001 to disable it.
SMALL_MODEL_DEFAULTS: dict[str, float] = {
    "temperature": 0.7,
    "top_p": 0.9,
    "repeat_penalty": 1.15,
}


def _sampling_kwargs(request: PromptRequest, default_max_tokens: int) -> dict[str, Any]:
    s = request.sampling
    if s.n not in (None, 1):
        raise BadRequest("the local model generates one choice (n=1)", model=LOCAL_MODEL_NAME)
    kwargs: dict[str, Any] = {"max_tokens": s.max_tokens or default_max_tokens}
    for key, value in (
        ("temperature", s.temperature),
        ("top_p", s.top_p),
        ("top_k", s.top_k),
        ("min_p", s.min_p),
        ("typical_p", s.typical_p),
        ("tfs_z", s.tfs),
        ("repeat_penalty", s.repetition_penalty),
        ("presence_penalty", s.presence_penalty),
        ("frequency_penalty", s.frequency_penalty),
        ("seed", s.seed),
    ):
        if value is not None:
            kwargs[key] = value
    if kwargs.get("repeat_penalty") == 1:
        del kwargs["repeat_penalty"]
    for key, value in SMALL_MODEL_DEFAULTS.items():
        kwargs.setdefault(key, value)
    for key in ("mirostat_mode", "mirostat_tau", "mirostat_eta"):
        if s.backend.get(key) is not None:
            kwargs[key] = s.backend[key]
    if s.logit_bias:
        try:
            kwargs["logit_bias"] = {int(k): float(v) for k, v in s.logit_bias.items()}
        except ValueError:
            raise BadRequest(
                "logit_bias keys must be token ids for the local model", model=LOCAL_MODEL_NAME
            ) from None
    if request.stop:
        kwargs["stop"] = list(request.stop)
    return kwargs


def build_call(request: PromptRequest, *, default_max_tokens: int = 512) -> LocalCall:
    """The llama-cpp-python call for ``request`` (pure: nothing is loaded)."""
    kwargs = _sampling_kwargs(request, default_max_tokens)
    grammar: GrammarSpec | None = None
    if isinstance(request, TextPrompt):
        if request.grammar:
            grammar = ("gbnf", request.grammar)
        elif request.response_format is not None:
            schema = request.response_format.schema
            grammar = ("json_schema", json.dumps(schema)) if schema else ("json", "")
        return LocalCall("text", {"prompt": request.prompt, **kwargs}, grammar)
    if request.tools:
        raise BadRequest(
            "the local model takes no native tools: fold them into the prompt",
            model=LOCAL_MODEL_NAME,
        )
    downgrades: list[str] = []
    messages: list[dict[str, str]] = []
    for message in request.messages:
        if isinstance(message.content, str):
            text = message.content
        else:
            pieces: list[str] = []
            for part in message.content:
                if isinstance(part, TextPart):
                    pieces.append(part.text)
                elif isinstance(part, ImagePart):
                    downgrades.append("image replaced by a text placeholder")
                    pieces.append(image_placeholder(part))
            text = "\n".join(pieces)
        messages.append({"role": message.role, "content": text})
    if request.response_format is not None:
        schema = request.response_format.schema
        grammar = ("json_schema", json.dumps(schema)) if schema else ("json", "")
    return LocalCall("chat", {"messages": messages, **kwargs}, grammar, tuple(downgrades))


class _Done:
    pass


_DONE = _Done()


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


_Item = list[StreamEvent] | _Failed | _Done


@dataclass
class LocalLlamaProvider:
    """An in-process llama.cpp model with ``Provider``'s ``stream`` / ``complete``.

    ``model_path`` defaults to :func:`~tavernkit.providers.local_model.require_model_path`
    (the SmolLM2 GGUF); ``llama`` may be an already loaded ``llama_cpp.Llama`` to share.
    ``seed`` is used when a request sets none, so runs are reproducible by default.
    """

    name: str = "local"
    model_path: Path | str | None = None
    model: str = LOCAL_MODEL_NAME
    n_ctx: int = 4096
    n_threads: int | None = None
    seed: int = 0
    max_tokens: int = 512
    profile: ModelProfile | None = None
    reasoning_template: Delimiters | None = None
    llama: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _load_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _formatter: Any = field(default=None, repr=False)

    def load(self) -> Any:
        """The ``llama_cpp.Llama`` instance, loaded on first use (blocking: call it from a
        thread, as :meth:`stream` does)."""
        with self._load_lock:
            if self.llama is None:
                llama_cpp = import_llama_cpp()
                path = Path(self.model_path) if self.model_path else require_model_path()
                try:
                    self.llama = llama_cpp.Llama(
                        model_path=str(path),
                        n_ctx=self.n_ctx,
                        n_threads=self.n_threads,
                        seed=self.seed,
                        verbose=False,
                    )
                except (ValueError, RuntimeError, OSError) as exc:
                    raise ProviderError(
                        f"cannot load {path.name}: {exc}", provider=self.name, model=self.model
                    ) from None
            return self.llama

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

    async def _generate(
        self, request: PromptRequest, abort: AbortLike | None
    ) -> AsyncGenerator[StreamEvent, None]:
        call = build_call(request, default_max_tokens=self.max_tokens)
        if "seed" not in call.kwargs:
            call.kwargs["seed"] = self.seed
        if abort is not None and abort.is_set():
            yield Finish("aborted")
            return
        llama = await asyncio.to_thread(self.load)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        stop = threading.Event()

        def put(item: _Item) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens
                loop.call_soon_threadsafe(queue.put_nowait, item)

        worker = loop.run_in_executor(None, self._work, llama, call, stop, put)
        delivered = False
        try:
            while True:
                item = await _next(queue, abort)
                if item is None:  # aborted
                    stop.set()
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
            stop.set()
            # Wait (briefly) for the worker to leave the model, so the next call finds it
            # free; the stop flag makes that one token at most.
            await asyncio.wait({worker}, timeout=10)

    def _work(
        self,
        llama: Any,
        call: LocalCall,
        stop: threading.Event,
        put: Callable[[_Item], None],
    ) -> None:
        try:
            with self._lock:
                if not stop.is_set():
                    self._run(llama, call, stop, put)
        except BaseException as exc:
            put(_Failed(exc))
        finally:
            put(_DONE)

    def _run(
        self,
        llama: Any,
        call: LocalCall,
        stop: threading.Event,
        put: Callable[[_Item], None],
    ) -> None:
        kwargs = dict(call.kwargs)
        if call.grammar is not None:
            kwargs["grammar"] = _grammar(call.grammar)
        if call.kind == "chat":
            chunks = llama.create_chat_completion(stream=True, **kwargs)
        else:
            chunks = llama.create_completion(stream=True, **kwargs)
        text: list[str] = []
        meta: ResponseMeta | None = None
        first = True
        finish: Finish | None = None
        try:
            for chunk in chunks:
                if stop.is_set():
                    return
                events: list[StreamEvent] = []
                if first:
                    # held until there is more to send, so that a failure before any output
                    # (a prompt over the context window) is still raised, not streamed
                    first = False
                    meta = ResponseMeta(chunk.get("id"), self.model)
                choice = (chunk.get("choices") or [{}])[0]
                piece = (
                    (choice.get("delta") or {}).get("content")
                    if call.kind == "chat"
                    else choice.get("text")
                )
                if piece:
                    text.append(piece)
                    events.append(TextDelta(piece))
                raw = choice.get("finish_reason")
                if raw:
                    finish = Finish(_FINISH.get(raw, "other"), raw)
                if events:
                    if meta is not None:
                        events.insert(0, meta)
                        meta = None
                    put(events)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        tail: list[StreamEvent] = [meta] if meta is not None else []
        put([*tail, finish or Finish("other", None), self._usage(llama, call, "".join(text))])

    def _usage(self, llama: Any, call: LocalCall, text: str) -> Usage:
        """Counts are recomputed (llama-cpp-python reports no usage when streaming): the
        prompt as the template rendered it, and the reply re-tokenized."""
        output = len(llama.tokenize(text.encode(), add_bos=False, special=True)) if text else 0
        prompt = call.kwargs.get("prompt")
        if prompt is None:
            prompt = self._render_chat(llama, call.kwargs["messages"])
        inputs = (
            len(llama.tokenize(prompt.encode(), add_bos=True, special=True))
            if prompt is not None
            else None
        )
        total = inputs + output if inputs is not None else None
        return Usage(input_tokens=inputs, output_tokens=output, total_tokens=total)

    def _render_chat(self, llama: Any, messages: list[dict[str, str]]) -> str | None:
        template = getattr(llama, "metadata", {}).get("tokenizer.chat_template")
        if not template:
            return None
        try:
            if self._formatter is None:
                fmt = importlib.import_module("llama_cpp.llama_chat_format")
                self._formatter = fmt.Jinja2ChatFormatter(
                    template=template,
                    eos_token=llama.detokenize([llama.token_eos()], special=True).decode(
                        errors="replace"
                    ),
                    bos_token=llama.detokenize([llama.token_bos()], special=True).decode(
                        errors="replace"
                    ),
                )
            return str(self._formatter(messages=messages).prompt)
        except Exception:  # a count we cannot make is "not reported", never a failure
            return None

    def _classify(self, exc: BaseException) -> ProviderError:
        if isinstance(exc, ProviderError):
            return exc
        message = f"{type(exc).__name__}: {exc}"
        match = _CONTEXT.search(str(exc))
        if match:
            return ContextTooLong(
                str(exc),
                n_prompt=int(match.group(1)),
                n_ctx=int(match.group(2)),
                provider=self.name,
                model=self.model,
            )
        if isinstance(exc, ValueError | TypeError):
            return BadRequest(message, provider=self.name, model=self.model)
        return ProviderError(message, provider=self.name, model=self.model)

    def with_options(self, **changes: Any) -> LocalLlamaProvider:
        """A provider sharing this one's loaded model and lock with other settings
        (a different seed, reasoning template or profile)."""
        clone = replace(self, **changes)
        if "llama" not in changes:
            clone.llama = self.llama
        clone._lock = self._lock
        clone._load_lock = self._load_lock
        return clone


def _grammar(spec: GrammarSpec) -> Any:
    llama_cpp = import_llama_cpp()
    kind, source = spec
    try:
        if kind == "json_schema":
            return llama_cpp.LlamaGrammar.from_json_schema(source, verbose=False)
        if kind == "json":
            grammars = importlib.import_module("llama_cpp.llama_grammar")
            return llama_cpp.LlamaGrammar.from_string(grammars.JSON_GBNF, verbose=False)
        return llama_cpp.LlamaGrammar.from_string(source, verbose=False)
    except (ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise BadRequest(
            f"cannot build a grammar for the {kind.replace('_', ' ')}: {exc}",
            model=LOCAL_MODEL_NAME,
        ) from None


async def _next(queue: asyncio.Queue[_Item], abort: AbortLike | None) -> _Item | None:
    """The next item, or ``None`` when ``abort`` fired first."""
    if abort is None:
        return await queue.get()
    if abort.is_set():
        return None
    if not queue.empty():
        return queue.get_nowait()
    get = asyncio.ensure_future(queue.get())
    stop = asyncio.ensure_future(abort.wait())
    try:
        done, _ = await asyncio.wait({get, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if get in done:
        return get.result()
    get.cancel()
    return None
