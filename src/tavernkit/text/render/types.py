"""The renderer's public value types: options, results and the provider signatures.

They follow the product brief's ``ChatLunaPromptRenderService`` API, spelled in Python:
``RenderOptions(extensions=(variable_providers, function_providers), configurable,
max_depth=10)``. tavernkit's additions (the macro environment, compat mode, side-effect-free
evaluation, the syntax to parse with) are extra fields with defaults, so a call written for the
brief's API works unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tavernkit.text.macros.evaluator import DEFAULT_MAX_OUTPUT_CHARS

if TYPE_CHECKING:
    from tavernkit.text.macros.env import Compat, MacroEnv

__all__ = [
    "FunctionProvider",
    "PresetRenderResult",
    "RenderConfigurable",
    "RenderExtensions",
    "RenderOptions",
    "RenderResult",
    "VariableProvider",
]

#: Free-form data passed through to function providers (session, conversation id...).
RenderConfigurable = Mapping[str, Any]
#: Called once per render; its mapping is spread over the variables (later providers win). A
#: value may be a thunk (a function of no arguments, sync or async) evaluated when referenced.
VariableProvider = Callable[[], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]
#: ``(args, variables, configurable) -> text``; may be ``async``. Arguments arrive as strings.
FunctionProvider = Callable[[list[str], Mapping[str, Any], RenderConfigurable], Any]


@dataclass(frozen=True, slots=True)
class RenderExtensions:
    """Per-call providers: they override the renderer's registered ones of the same name."""

    variable_providers: Sequence[VariableProvider] = ()
    function_providers: Mapping[str, FunctionProvider] = field(default_factory=dict)


ExtensionsInput = (
    RenderExtensions
    | tuple[Sequence[VariableProvider], Mapping[str, FunctionProvider]]
    | Mapping[str, Any]
    | None
)


def _extensions(value: ExtensionsInput) -> RenderExtensions:
    if value is None:
        return RenderExtensions()
    if isinstance(value, RenderExtensions):
        return value
    if isinstance(value, tuple):
        variable_providers, function_providers = value
        return RenderExtensions(tuple(variable_providers or ()), dict(function_providers or {}))
    unknown = set(value) - {"variable_providers", "function_providers"}
    if unknown:
        raise TypeError(f"unknown RenderOptions.extensions keys: {sorted(unknown)}")
    return RenderExtensions(
        tuple(value.get("variable_providers") or ()), dict(value.get("function_providers") or {})
    )


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """How one render runs.

    ``extensions``: a :class:`RenderExtensions`, a ``(variable_providers, function_providers)``
    pair or a mapping with those keys. ``max_depth``: the macro nesting limit (``<= 0`` returns
    the source unrendered). tavernkit additions: ``env`` (names, card fields, clock, chat
    variables; a default environment when None), ``compat``, ``skip_side_effects``,
    ``substitute_macros=False`` (return the source as is, for editing flows),
    ``max_output_chars`` and ``syntax`` (a syntax registered on the renderer, by name).
    """

    extensions: RenderExtensions = field(default_factory=RenderExtensions)
    configurable: RenderConfigurable = field(default_factory=dict)
    max_depth: int = 10
    env: MacroEnv | None = None
    compat: Compat | None = None
    skip_side_effects: bool = False
    substitute_macros: bool = True
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    syntax: str | None = None

    def __init__(
        self,
        extensions: ExtensionsInput = None,
        configurable: RenderConfigurable | None = None,
        max_depth: int = 10,
        *,
        env: MacroEnv | None = None,
        compat: Compat | None = None,
        skip_side_effects: bool = False,
        substitute_macros: bool = True,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        syntax: str | None = None,
    ) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "extensions", _extensions(extensions))
        setattr_(self, "configurable", dict(configurable or {}))
        setattr_(self, "max_depth", max_depth)
        setattr_(self, "env", env)
        setattr_(self, "compat", compat)
        setattr_(self, "skip_side_effects", skip_side_effects)
        setattr_(self, "substitute_macros", substitute_macros)
        setattr_(self, "max_output_chars", max_output_chars)
        setattr_(self, "syntax", syntax)


@dataclass(frozen=True, slots=True)
class RenderResult:
    """The rendered text and the variable and function names it used, first-seen order."""

    text: str
    variables: list[str]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PresetRenderResult:
    """``render_preset_template``'s result: one message per enabled, non-marker prompt.

    ``identifiers[i]`` is the prompt identifier ``messages[i]`` came from; ``variables`` is the
    union of the names the prompts used, in first-seen order.
    """

    messages: list[dict[str, Any]]
    variables: list[str]
    identifiers: list[str]
    warnings: tuple[str, ...] = ()
