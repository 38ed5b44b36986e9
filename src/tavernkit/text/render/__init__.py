"""The prompt-template renderer service (``tk.prompt_renderer``): providers, variables and
``render_template`` / ``render_messages`` / ``render_preset_template`` on the macro engine."""

from __future__ import annotations

from tavernkit.text.render.chatluna_service import ChatLunaRenderService
from tavernkit.text.render.context import AsyncBridge, RenderContext
from tavernkit.text.render.renderer import PromptRenderer, RendererSubstitute
from tavernkit.text.render.syntax import MacroSyntax, SyntaxResult, TemplateSyntax
from tavernkit.text.render.types import (
    FunctionProvider,
    PresetRenderResult,
    RenderConfigurable,
    RenderExtensions,
    RenderOptions,
    RenderResult,
    VariableProvider,
)
from tavernkit.text.render.url import UrlPolicy, UrlRefused, fetch_url

__all__ = [
    "AsyncBridge",
    "ChatLunaRenderService",
    "FunctionProvider",
    "MacroSyntax",
    "PresetRenderResult",
    "PromptRenderer",
    "RenderConfigurable",
    "RenderContext",
    "RenderExtensions",
    "RenderOptions",
    "RenderResult",
    "RendererSubstitute",
    "SyntaxResult",
    "TemplateSyntax",
    "UrlPolicy",
    "UrlRefused",
    "VariableProvider",
    "fetch_url",
]
