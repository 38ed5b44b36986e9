"""``PromptRenderer``: the renderer service of the product brief, on the macro engine.

Every text the pipeline sends to a model goes through one renderer (``tk.prompt_renderer``),
so a function or variable provider registered here works in every prompt: direct calls use
``render_template`` / ``render_messages`` / ``render_preset_template``; the synchronous prompt
builders take ``substitute_for(env)``, an evaluator with the same providers.

Names and precedence (lowest first): static variables (``set_variable``) < the call's
``variables`` < registered variable providers < per-call variable providers (in order; each
provider's mapping is spread over the previous ones). Function providers: the built-in ``url``
(when enabled) < registered < per-call. In a template a bare ``{{name}}`` is a variable if
there is one, else a function provider called with no arguments; ``{{name::a::b}}`` calls the
function provider. Both shadow the built-in macros of the same name (case-insensitive, as
macro names are). The brief's built-in functions (``time_UTC``, ``timeDiff``, ``date``,
``weekday``, ``isotime``, ``isodate``, ``random``, ``pick``, ``roll``) are the macros of those
names, with SillyTavern's semantics.

Messages render one after another, in order (ChatLuna renders them concurrently): variables
set by one message's ``{{setvar}}`` are seen by the next, and the reported names are in a
stable first-seen order. Only system, developer, user and assistant messages are rendered;
tool results pass through untouched, so text a tool fetched cannot run macros.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx2

from tavernkit.models.preset import GLOBAL_CHARACTER_ID
from tavernkit.text.macros.env import Compat, MacroEnv
from tavernkit.text.macros.registry import MacroRegistry
from tavernkit.text.render.chatluna import ChatLunaSyntax
from tavernkit.text.render.chatluna_service import chatluna_url
from tavernkit.text.render.context import AsyncBridge, RenderContext
from tavernkit.text.render.syntax import MacroSyntax, TemplateSyntax
from tavernkit.text.render.types import (
    FunctionProvider,
    PresetRenderResult,
    RenderOptions,
    RenderResult,
    VariableProvider,
)
from tavernkit.text.render.url import UrlPolicy, url_provider

if TYPE_CHECKING:
    from tavernkit.models.chatluna import ChatLunaPreset
    from tavernkit.models.preset import ChatCompletionPreset

__all__ = ["PromptRenderer", "RendererSubstitute"]

_RENDERED_ROLES = frozenset({"system", "developer", "user", "assistant"})
# Characters without which a text holds no macro, legacy tag or escape (skip the engine).
_MACRO_CHARS = ("{", "<", "\\")
_DEFAULT_OPTIONS = RenderOptions()


def _disposer(action: Callable[[], None]) -> Callable[[], None]:
    done = False

    def dispose() -> None:
        nonlocal done
        if not done:
            done = True
            action()

    return dispose


class PromptRenderer:
    """The renderer service (see the module docstring for names and precedence)."""

    def __init__(
        self,
        *,
        registry: MacroRegistry | None = None,
        url: UrlPolicy | None = None,
        url_transport: httpx2.AsyncBaseTransport | None = None,
        env_factory: Callable[[], MacroEnv] | None = None,
    ) -> None:
        self._statics: dict[str, str] = {}
        self._functions: dict[str, FunctionProvider] = {}
        self._variable_providers: list[VariableProvider] = []
        self._syntaxes: dict[str, TemplateSyntax] = {
            "macros": MacroSyntax(registry),
            "chatluna": ChatLunaSyntax(),
        }
        self.default_syntax = "macros"
        self.url_policy = url or UrlPolicy()
        self._builtin_functions: dict[str, FunctionProvider] = {}
        #: the built-ins of ChatLuna's dialect that differ from the macros' (url's fourth
        #: argument is a maximum length there, a timeout here)
        self._chatluna_functions: dict[str, FunctionProvider] = {}
        if self.url_policy.enabled:
            self._builtin_functions["url"] = url_provider(self.url_policy, transport=url_transport)
            self._chatluna_functions["url"] = chatluna_url(self.url_policy, url_transport)
        self._env_factory = env_factory

    # -- registration ---------------------------------------------------------------------

    def register_function_provider(
        self, name: str, handler: FunctionProvider
    ) -> Callable[[], None]:
        """Add (or replace) a function; the returned callable removes this registration."""
        if not name or not isinstance(name, str):
            raise ValueError("a function provider needs a name")
        self._functions[name] = handler

        def remove() -> None:
            if self._functions.get(name) is handler:
                del self._functions[name]

        return _disposer(remove)

    def register_variable_provider(self, provider: VariableProvider) -> Callable[[], None]:
        """Add a provider called once per render; the returned callable removes it."""
        self._variable_providers.append(provider)

        def remove() -> None:
            for index, existing in enumerate(self._variable_providers):
                if existing is provider:
                    del self._variable_providers[index]
                    return

        return _disposer(remove)

    def set_variable(self, name: str, value: str) -> None:
        self._statics[name] = value

    def get_variable(self, name: str) -> str | None:
        return self._statics.get(name)

    def remove_variable(self, name: str) -> None:
        self._statics.pop(name, None)

    def register_syntax(self, name: str, syntax: TemplateSyntax) -> Callable[[], None]:
        """Add a template syntax, chosen per render with ``RenderOptions(syntax=name)``."""
        self._syntaxes[name] = syntax

        def remove() -> None:
            if self._syntaxes.get(name) is syntax and name != "macros":
                del self._syntaxes[name]

        return _disposer(remove)

    # -- rendering ------------------------------------------------------------------------

    async def render_template(
        self,
        source: str,
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
    ) -> RenderResult:
        options = self._options(options)
        if not options.substitute_macros:
            return RenderResult(source, [])
        merged = await self._merge_variables(variables, options)
        return await self._render(source, merged, self._function_table(options), options)

    async def render_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
    ) -> list[dict[str, Any]]:
        """New message dicts with their text rendered; every other key and part is kept."""
        rendered, _, _ = await self._render_message_list(messages, variables, options)
        return rendered

    async def render_preset_template(
        self,
        preset: ChatCompletionPreset,
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
        *,
        character_id: int | None = None,
    ) -> PresetRenderResult:
        """Render each enabled prompt of the preset's active order (markers and empty prompts
        have no text of their own and are skipped) into ``{"role", "content"}`` messages."""

        order = preset.active_order(GLOBAL_CHARACTER_ID if character_id is None else character_id)
        messages: list[dict[str, Any]] = []
        identifiers: list[str] = []
        for item in order:
            if not item.enabled:
                continue
            prompt = preset.prompt(item.identifier)
            if prompt is None or prompt.marker or not prompt.content:
                continue
            messages.append({"role": prompt.role or "system", "content": prompt.content})
            identifiers.append(item.identifier)
        rendered, used, warnings = await self._render_message_list(messages, variables, options)
        return PresetRenderResult(rendered, used, identifiers, warnings)

    async def render_chatluna_preset(
        self,
        preset: ChatLunaPreset,
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
    ) -> PresetRenderResult:
        """ChatLuna's ``renderPresetTemplate``: every prompt of the preset rendered in
        ChatLuna's dialect (whatever ``options.syntax`` says) into ``{"role", "content"}``
        messages, content parts kept as parts with their text rendered. ``identifiers[i]``
        is the prompt's ``type`` (``description``, ``first_message``...) or its index."""
        options = dataclasses.replace(options or _DEFAULT_OPTIONS, syntax="chatluna")
        messages = [{"role": p.role, "content": p.content} for p in preset.prompts]
        identifiers = [p.type or str(n) for n, p in enumerate(preset.prompts)]
        rendered, used, warnings = await self._render_message_list(messages, variables, options)
        return PresetRenderResult(rendered, used, identifiers, warnings)

    async def format_chatluna_input(
        self,
        preset: ChatLunaPreset,
        prompt: str,
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
    ) -> RenderResult:
        """A user message wrapped in the preset's ``format_user_prompt`` (default
        ``{prompt}``), as ChatLuna's ``formatUserPromptString`` does: ``variables`` (the sender's
        ``sender``, ``sender_id``... and the system variables) with ``prompt`` on top."""
        options = dataclasses.replace(options or _DEFAULT_OPTIONS, syntax="chatluna")
        return await self.render_template(
            preset.input_format, {**(variables or {}), "prompt": prompt}, options
        )

    def render_sync(
        self,
        source: str,
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
    ) -> RenderResult:
        """``render_template`` for synchronous callers. Async providers are run to completion
        when no event loop is running in this thread; inside a running loop they cannot be
        awaited here, so their macros stay as written with a warning (use the async API)."""
        options = self._options(options)
        if not options.substitute_macros:
            return RenderResult(source, [])
        bridge = AsyncBridge()
        merged = dict(self._statics)
        merged.update(variables or {})
        for provider in self._providers(options):
            merged.update(bridge.resolve(provider()))
        context = RenderContext(merged, self._function_table(options), options.configurable, bridge)
        result = self._syntax(options).render(source, context, options)
        return RenderResult(result.text, list(context.used), result.warnings)

    def substitute_for(
        self,
        env: MacroEnv,
        *,
        compat: Compat | None = None,
        skip_side_effects: bool = False,
        variables: Mapping[str, Any] | None = None,
        options: RenderOptions | None = None,
    ) -> RendererSubstitute:
        """An evaluator for the synchronous prompt builders (``substitute=`` of
        ``build_chat_completion`` and friends) that goes through this renderer. Variable
        providers are called once, here: one prompt build is one render for them."""
        base = self._options(options)
        base = dataclasses.replace(
            base, env=env, compat=compat or base.compat, skip_side_effects=skip_side_effects
        )
        bridge = AsyncBridge()
        merged = dict(self._statics)
        merged.update(variables or {})
        for provider in self._providers(base):
            merged.update(bridge.resolve(provider()))
        return RendererSubstitute(self, merged, self._function_table(base), base)

    # -- internals ------------------------------------------------------------------------

    def _options(self, options: RenderOptions | None) -> RenderOptions:
        options = options or _DEFAULT_OPTIONS
        if options.env is None and self._env_factory is not None:
            options = dataclasses.replace(options, env=self._env_factory())
        return options

    def _providers(self, options: RenderOptions) -> list[VariableProvider]:
        return [*self._variable_providers, *options.extensions.variable_providers]

    async def _merge_variables(
        self, variables: Mapping[str, Any] | None, options: RenderOptions
    ) -> dict[str, Any]:
        merged: dict[str, Any] = dict(self._statics)
        merged.update(variables or {})
        for provider in self._providers(options):
            produced = provider()
            if inspect.isawaitable(produced):
                produced = await produced
            merged.update(produced)
        return merged

    def _function_table(self, options: RenderOptions) -> dict[str, FunctionProvider]:
        dialect = self._chatluna_functions if options.syntax == "chatluna" else {}
        return {
            **self._builtin_functions,
            **dialect,
            **self._functions,
            **options.extensions.function_providers,
        }

    def _syntax(self, options: RenderOptions) -> TemplateSyntax:
        name = options.syntax or self.default_syntax
        try:
            return self._syntaxes[name]
        except KeyError:
            raise ValueError(f"unknown template syntax {name!r}") from None

    async def _render(
        self,
        source: str,
        variables: dict[str, Any],
        functions: dict[str, FunctionProvider],
        options: RenderOptions,
    ) -> RenderResult:
        context = RenderContext(variables, functions, options.configurable)
        syntax = self._syntax(options)
        if _needs_loop(source, context):
            context.bridge.loop = asyncio.get_running_loop()
            result = await asyncio.to_thread(syntax.render, source, context, options)
        else:
            result = syntax.render(source, context, options)
        return RenderResult(result.text, list(context.used), result.warnings)

    async def _render_message_list(
        self,
        messages: Sequence[Mapping[str, Any]],
        variables: Mapping[str, Any] | None,
        options: RenderOptions | None,
    ) -> tuple[list[dict[str, Any]], list[str], tuple[str, ...]]:
        options = self._options(options)
        if options.env is None:
            # one environment for the whole list: a {{setvar}} in one message is read by the
            # next (a fresh default per message would drop it)
            options = dataclasses.replace(options, env=MacroEnv())
        out: list[dict[str, Any]] = []
        used: dict[str, None] = {}
        warnings: list[str] = []
        if not options.substitute_macros:
            return [dict(m) for m in messages], [], ()
        merged = await self._merge_variables(variables, options)
        functions = self._function_table(options)

        async def render(text: str) -> str:
            result = await self._render(text, merged, functions, options)
            used.update(dict.fromkeys(result.variables))
            warnings.extend(result.warnings)
            return result.text

        for message in messages:
            copy = dict(message)
            content = copy.get("content")
            if copy.get("role") in _RENDERED_ROLES:
                if isinstance(content, str):
                    copy["content"] = await render(content)
                elif isinstance(content, list):
                    parts: list[Any] = []
                    for part in content:
                        if (
                            isinstance(part, Mapping)
                            and part.get("type") == "text"
                            and isinstance(part.get("text"), str)
                        ):
                            part = {**part, "text": await render(part["text"])}
                        parts.append(part)
                    copy["content"] = parts
            out.append(copy)
        return out, list(used), tuple(warnings)


def _needs_loop(source: str, context: RenderContext) -> bool:
    """Whether the render may call an async provider: one is present and its name occurs in the
    source (names are lexical in every syntax, so a name absent from the text is never called;
    ``{{if}}`` conditions computed at run time are the exception, see ``AsyncBridge``)."""
    names = context.async_names()
    if not names:
        return False
    folded = source.lower()
    return any(name.lower() in folded for name in names)


class RendererSubstitute:
    """The prompt builders' ``Substitute`` backed by a renderer (see ``substitute_for``)."""

    __slots__ = ("functions", "options", "renderer", "variables")

    def __init__(
        self,
        renderer: PromptRenderer,
        variables: dict[str, Any],
        functions: dict[str, FunctionProvider],
        options: RenderOptions,
    ) -> None:
        self.renderer = renderer
        self.variables = variables
        self.functions = functions
        self.options = options

    @property
    def env(self) -> MacroEnv:
        assert self.options.env is not None
        return self.options.env

    def __call__(
        self,
        text: str,
        /,
        *,
        original: str | None = None,
        dynamic: Mapping[str, str] | None = None,
    ) -> str:
        if not text or not any(c in text for c in _MACRO_CHARS):
            return text
        options = self.options
        if original is not None or dynamic:
            env = self.env
            merged = {**(env.dynamic_macros or {}), **(dynamic or {})}
            env = dataclasses.replace(env, original=original, dynamic_macros=merged)
            options = dataclasses.replace(options, env=env)
        context = RenderContext(self.variables, self.functions, options.configurable)
        return self.renderer._syntax(options).render(text, context, options).text
