"""``ChatLunaRenderService``: ChatLuna's ``ctx.chatluna.promptRenderer`` (the product brief's
document 002), speaking ChatLuna's ``{name}`` dialect, as koishi-plugin-chatluna 1.3.36 does.

The API is the brief's, in Python spelling: ``register_function_provider(name, handler)`` and
``register_variable_provider(provider)`` return a disposer; ``set_variable`` /
``get_variable`` / ``remove_variable`` manage static variables; ``render_template(source,
variables=None, options=None)`` returns a :class:`~tavernkit.text.render.types.RenderResult`
(``text`` and the ``variables`` names it used); ``render_messages`` renders ChatLuna (LangChain)
messages; ``render_preset_template`` renders a ChatLuna preset's prompts. Options are optional
everywhere: ``RenderOptions(extensions, configurable, max_depth)`` as in the brief.

Names and precedence, as ChatLuna: static variables < the call's variables < registered
variable providers < per-call providers (each spread over the previous; a provider returning
``None`` adds nothing; one returning an awaitable adds nothing either, as ChatLuna does not
await it; one that raises fails the render). Providers are called once per render (per message
for ``render_messages``). Function providers: the built-ins (``time_UTC timeDiff date weekday
isotime isodate random pick roll url``) < registered (a later registration replaces, and any
disposer for a name removes whatever is registered under it now) < per-call.

Deliberate differences: ``url()`` reaches only what the service's
:class:`~tavernkit.text.render.url.UrlPolicy` allows (off by default: a template that can fetch
is a request-forgery hole), and ``{repeat}`` with an infinite count renders ``''``.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx2

import tavernkit.text.render.chatluna_js as js
from tavernkit.errors import TemplateError
from tavernkit.jscompat import utf16_len
from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.render.chatluna import ChatLunaEvaluation, Interleaving, evaluate_template
from tavernkit.text.render.chatluna_functions import builtin_functions, js_parse_int
from tavernkit.text.render.context import AsyncBridge, is_async_callable
from tavernkit.text.render.types import (
    FunctionProvider,
    PresetRenderResult,
    RenderOptions,
    RenderResult,
    VariableProvider,
)
from tavernkit.text.render.url import UrlPolicy, fetch_url

if TYPE_CHECKING:
    from tavernkit.models.chatluna import ChatLunaPreset

__all__ = ["ChatLunaRenderService", "chatluna_url"]

#: ChatLuna's message types a render keeps (LangChain's ``getType()``); others are refused
_MESSAGE_TYPES = frozenset({"human", "ai", "system"})
_ROLE_TYPES = {"user": "human", "assistant": "ai", "system": "system"}
_DEFAULT_OPTIONS = RenderOptions()
#: what fetch accepts as a method name (an HTTP token)
_HTTP_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


class ChatLunaRenderService:
    """ChatLuna's prompt renderer service (see the module docstring)."""

    #: JavaScript's ``undefined``, for providers that mean it (``None`` is ``null``)
    UNDEFINED = js.UNDEFINED

    def __init__(
        self,
        *,
        env: MacroEnv | None = None,
        env_factory: Callable[[], MacroEnv] | None = None,
        url: UrlPolicy | None = None,
        url_transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        """``env`` (or ``env_factory``, called per render) gives the built-ins their clock,
        time zone and random source; ``url`` enables ``url()`` under that policy."""
        self._env = env
        self._env_factory = env_factory
        self._statics: dict[str, Any] = {}
        self._functions: dict[str, FunctionProvider] = {}
        self._variable_providers: list[VariableProvider] = []
        self.url_policy = url or UrlPolicy()
        self._url_transport = url_transport
        for name, builtin in builtin_functions().items():
            self.register_function_provider(name, self._builtin(builtin))
        self.register_function_provider("url", chatluna_url(self.url_policy, url_transport))

    # -- registration ---------------------------------------------------------------------

    def register_function_provider(
        self, name: str, handler: FunctionProvider
    ) -> Callable[[], None]:
        """Add (or replace) a function; the disposer removes the name (ChatLuna's rule)."""
        if not name or not isinstance(name, str):
            raise ValueError("a function provider needs a name")
        self._functions[name] = handler

        def dispose() -> None:
            self._functions.pop(name, None)

        return dispose

    def register_variable_provider(self, provider: VariableProvider) -> Callable[[], None]:
        """Add a provider called at the start of each render; the disposer removes it."""
        self._variable_providers.append(provider)

        def dispose() -> None:
            for index, existing in enumerate(self._variable_providers):
                if existing is provider:
                    del self._variable_providers[index]
                    return

        return dispose

    def set_variable(self, name: str, value: Any) -> None:
        self._statics[name] = value

    def get_variable(self, name: str) -> Any | None:
        """The static variable, or ``None`` when there is none."""
        return self._statics.get(name)

    def remove_variable(self, name: str) -> None:
        self._statics.pop(name, None)

    # -- rendering ------------------------------------------------------------------------

    async def render_template(
        self,
        source: str,
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
    ) -> RenderResult:
        """Render one template in ChatLuna's dialect. A malformed or failing block header,
        or a variable provider that raises, is a :class:`~tavernkit.errors.TemplateError`."""
        result, _ = await self._render(source, variables, options or _DEFAULT_OPTIONS)
        return result

    async def render_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
    ) -> list[dict[str, Any]]:
        """Render ChatLuna messages (``{"type": "human"|"ai"|"system", "content",
        "additional_kwargs"?}``; ``role`` user/assistant/system is read as the type). As
        1.3.36: each message is one render (providers called per message), content parts
        are flattened to their text, and the result keeps only ``type``, ``content`` and
        ``additional_kwargs``. Another type (tool, generic) is a :class:`TypeError`."""
        options = options or _DEFAULT_OPTIONS
        types = [_message_type(message) for message in messages]
        results, _ = await self._render_all(messages, variables, options)
        return [
            _message(kind, result.text, message)
            for kind, message, result in zip(types, messages, results, strict=True)
        ]

    async def render_preset_template(
        self,
        preset: ChatLunaPreset,
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
    ) -> PresetRenderResult:
        """Render every prompt of a ChatLuna preset into ChatLuna messages (``additional_kwargs``
        holds the prompt's ``type``); ``variables`` is the union of the names the prompts
        used, in the order ChatLuna's concurrent renders finish."""
        options = options or _DEFAULT_OPTIONS
        messages = preset.messages()
        results, finished = await self._render_all(messages, variables, options)
        names: dict[str, None] = {}
        for index in finished:
            names.update(dict.fromkeys(results[index].variables))
        out = [
            _message(message["type"], result.text, message)
            for message, result in zip(messages, results, strict=True)
        ]
        identifiers = [p.type or str(n) for n, p in enumerate(preset.prompts)]
        warnings = tuple(w for result in results for w in result.warnings)
        return PresetRenderResult(out, list(names), identifiers, warnings)

    # -- internals ------------------------------------------------------------------------

    def _environment(self) -> MacroEnv:
        if self._env_factory is not None:
            return self._env_factory()
        if self._env is None:
            self._env = MacroEnv()
        return self._env

    def _builtin(self, builtin: Callable[[list[str], MacroEnv, Any], str]) -> FunctionProvider:
        def provider(args: list[str], variables: Mapping[str, Any], configurable: Any) -> str:
            return builtin(args, self._environment(), configurable)

        return provider

    def _merged(
        self, variables: Mapping[str, Any] | None, options: RenderOptions
    ) -> dict[str, Any]:
        merged: dict[str, Any] = {**self._statics, **(variables or {})}
        for provider in [*self._variable_providers, *options.extensions.variable_providers]:
            produced = provider()
            if inspect.isawaitable(produced):
                # ChatLuna spreads the promise itself, which adds nothing
                _discard(produced)
                continue
            if produced is not None:
                merged.update(produced)
        return merged

    def _function_table(self, options: RenderOptions) -> dict[str, FunctionProvider]:
        return {**self._functions, **options.extensions.function_providers}

    def _evaluation(
        self, variables: Mapping[str, Any] | None, options: RenderOptions
    ) -> ChatLunaEvaluation:
        """A render's start, as ChatLuna's: the variables merged (providers called)."""
        try:
            merged = self._merged(variables, options)
        except Exception as exc:
            raise TemplateError(f"a variable provider failed: {exc}") from exc
        return ChatLunaEvaluation(
            merged,
            self._function_table(options),
            options.configurable,
            max_depth=options.max_depth,
        )

    async def _render(
        self,
        source: str,
        variables: Mapping[str, Any] | None,
        options: RenderOptions,
    ) -> tuple[RenderResult, int]:
        if options.max_depth <= 0:
            return RenderResult(source, []), 0
        evaluation = self._evaluation(variables, options)
        if _may_await(evaluation.scope, evaluation.functions, source):
            evaluation.bridge = AsyncBridge(asyncio.get_running_loop())
            text = await asyncio.to_thread(evaluate_template, source, evaluation)
        else:
            text = evaluate_template(source, evaluation)
        return _result(text, evaluation), evaluation.ticks

    async def _render_all(
        self,
        messages: Sequence[Mapping[str, Any]],
        variables: Mapping[str, Any] | None,
        options: RenderOptions,
    ) -> tuple[list[RenderResult], list[int]]:
        """Render each message's text as ChatLuna does, all at once: every render calls the
        variable providers as it starts (so in message order), and their function calls
        interleave by promise tick (:class:`~tavernkit.text.render.chatluna.Interleaving`).
        Returns the results in message order and the order the renders finished."""
        sources = [_content_text(message.get("content")) for message in messages]
        if options.max_depth <= 0:
            return [RenderResult(source, []) for source in sources], list(range(len(sources)))
        if len(sources) == 1:
            result, _ = await self._render(sources[0], variables, options)
            return [result], [0]
        evaluations = [self._evaluation(variables, options) for _ in sources]
        turns = Interleaving(len(sources))
        loop = asyncio.get_running_loop()
        for index, evaluation in enumerate(evaluations):
            evaluation.interleaving, evaluation.index = turns, index
            evaluation.bridge = AsyncBridge(loop)
        failures: dict[int, tuple[int, BaseException]] = {}

        def run(index: int) -> str:
            evaluation = evaluations[index]
            try:
                text = evaluate_template(sources[index], evaluation)
            except BaseException as exc:
                failures[index] = (evaluation.ticks, exc)
                turns.abandon(index)
                return ""
            turns.finish(index, evaluation.ticks)
            return text

        # one thread each: a render waiting for its turn holds its thread
        with ThreadPoolExecutor(max_workers=len(sources)) as pool:
            texts = await asyncio.gather(
                *(loop.run_in_executor(pool, run, index) for index in range(len(sources)))
            )
        if failures:
            _, error = min(failures.values(), key=lambda failure: failure[0])
            raise error
        results = [_result(text, e) for text, e in zip(texts, evaluations, strict=True)]
        return results, turns.finished


def _result(text: str, evaluation: ChatLunaEvaluation) -> RenderResult:
    return RenderResult(text, list(evaluation.names), tuple(evaluation.warnings))


def chatluna_url(
    policy: UrlPolicy, transport: httpx2.AsyncBaseTransport | None = None
) -> FunctionProvider:
    """ChatLuna's ``url(method, url, body?, max_length?)``: the response text (whatever the
    status), cut to ``max_length`` UTF-16 units (default 1,000; not a number: no cut). A body
    on GET or HEAD, a method that is no HTTP token, a refused or failed request: an error (the
    tag renders empty). Requests go through ``policy`` (:func:`~.url.fetch_url`)."""

    async def url(args: list[str], variables: Mapping[str, Any], configurable: Any) -> str:
        if len(args) < 2:
            raise ValueError("url() needs a method and a URL")
        method, target = args[0], args[1]
        body = args[2] if len(args) > 2 else None
        if not _HTTP_TOKEN.fullmatch(method):
            raise TypeError(f"{method!r} is not a valid HTTP method")
        if body is not None and method.upper() in ("GET", "HEAD"):
            raise TypeError("Request with GET/HEAD method cannot have body")
        text = await fetch_url(policy, method, target, body, transport=transport)
        limit = js_parse_int(args[3] if len(args) > 3 else "1000")
        if limit == limit and limit != 0 and utf16_len(text) > limit:
            text = js.utf16_slice(text, 0, max(int(limit), 0))
        return text

    return url


def _discard(value: Awaitable[Any]) -> None:
    close = getattr(value, "close", None)
    if callable(close):
        close()


def _may_await(variables: Mapping[str, Any], functions: Mapping[str, Any], source: str) -> bool:
    """Whether a render may meet an async provider or thunk (it then runs in a worker thread
    whose awaits go back to this loop); only names the source mentions can be reached."""
    for table in (functions, variables):
        for name, value in table.items():
            if is_async_callable(value) and name in source:
                return True
    return False


def _content_text(content: Any) -> str:
    """ChatLuna's ``getMessageContent``: a string, or the text parts joined."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return "".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, Mapping) and part.get("type") == "text"
    )


def _message_type(message: Mapping[str, Any]) -> str:
    kind = message.get("type") or _ROLE_TYPES.get(str(message.get("role")))
    if kind not in _MESSAGE_TYPES:
        raise TypeError(f"the prompt renderer does not support message type {kind!r}")
    return str(kind)


def _message(kind: str, text: str, source: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": kind,
        "content": text,
        "additional_kwargs": dict(source.get("additional_kwargs") or {}),
    }
