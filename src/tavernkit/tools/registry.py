"""Function tools and the per-``Tavern`` registry that holds them.

The registry belongs to one ``Tavern`` instance, never to the process: two taverns in one
process (a server with two users, a test) must not see each other's tools. Per-request
``tools`` of ``generate_task`` replace the registry for that call (see :func:`tools_from_specs`);
they are never merged into it.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tavernkit.errors import GenerateTaskError

__all__ = [
    "TOOL_NAME_PATTERN",
    "FunctionTool",
    "ToolAction",
    "ToolRegistry",
    "ToolSource",
    "check_tool_name",
    "tools_from_specs",
]

log = logging.getLogger("tavernkit.tools")

#: OpenAI's rule for function names; the strictest of the providers, so a name that passes
#: works everywhere.
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

ToolAction = Callable[[dict[str, Any]], Any]
ShouldRegister = Callable[[], bool | Awaitable[bool]]


def _default_parameters() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class FunctionTool:
    """A tool the model may call.

    ``action`` receives the parsed (and schema-validated) arguments; it may be sync or async.
    Its return value is stored as is when it is a string, else as JSON. ``format_message``
    gives the text shown and stored while the tool runs (default ``"Invoking tool: NAME"``).
    ``should_register`` (sync or async) is asked at every generation; ``False`` leaves the
    tool out of that request, and so does a ``should_register`` that raises (logged by tool
    name and exception class, never its message). ``stealth`` tools run, their invocations
    are stored nowhere (hidden from the transcript and later prompts), and no follow-up
    generation happens after them. ``action=None`` describes a tool whose calls the caller
    handles itself (``generate_task``'s per-request tools).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=_default_parameters)
    action: ToolAction | None = None
    display_name: str = ""
    format_message: Callable[[dict[str, Any]], str] | None = None
    should_register: ShouldRegister | None = None
    stealth: bool = False

    def __post_init__(self) -> None:
        check_tool_name(self.name)
        if not isinstance(self.parameters, Mapping):
            raise GenerateTaskError(
                "invalid_input",
                f"tool {self.name!r}: parameters must be a JSON Schema object",
                details={"name": self.name, "field": "parameters"},
            )

    @property
    def label(self) -> str:
        return self.display_name or self.name

    def message_for(self, args: dict[str, Any]) -> str:
        """The display text for one invocation; a failing formatter falls back to the default
        (a display helper must never break the tool run)."""
        if self.format_message is not None:
            try:
                text = self.format_message(args)
            except Exception:
                text = None
            if isinstance(text, str):
                return text
        return f"Invoking tool: {self.label}"

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tools[]`` entry (what native calling sends)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


def check_tool_name(name: object) -> str:
    """The name, or ``invalid_input`` when it breaks ``^[a-zA-Z0-9_-]{1,64}$``."""
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
        raise GenerateTaskError(
            "invalid_input",
            f"invalid tool name {name!r}: must match {TOOL_NAME_PATTERN.pattern}",
            details={"name": name, "field": "name"},
        )
    return name


async def _allowed(tool: FunctionTool) -> bool:
    if tool.should_register is None:
        return True
    try:
        verdict = tool.should_register()
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception as exc:
        # one plugin's broken gate must not break every chat turn (SillyTavern skips it too)
        log.warning("tool %s: should_register failed (%s); left out", tool.name, type(exc).__name__)
        return False
    return bool(verdict)


class ToolSource(Protocol):
    """Tools that come from elsewhere (an owner's MCP servers): asked before every
    generation, as ``should_register`` is, for the tools it offers now."""

    async def tools(self, kind: str = "normal") -> list[FunctionTool]: ...


class ToolRegistry:
    """The tools registered on one ``Tavern``, in registration order, then its sources'."""

    def __init__(self, tools: Iterable[FunctionTool] = ()) -> None:
        self._tools: dict[str, FunctionTool] = {}
        self._sources: list[ToolSource] = []
        for tool in tools:
            self.register_function_tool(tool)

    def add_source(self, source: ToolSource) -> None:
        """Offer ``source``'s tools after the registered ones (a name a registered tool
        already has is left out of that generation and logged: the registered tool wins)."""
        self._sources.append(source)

    @property
    def has_sources(self) -> bool:
        """Whether tools may come from a source (so an empty registry may still offer some)."""
        return bool(self._sources)

    def register_function_tool(self, tool: FunctionTool, *, replace: bool = False) -> None:
        """Add ``tool``; a second tool with the same name is ``invalid_input`` unless
        ``replace`` (two plugins silently shadowing each other is a bug worth surfacing)."""
        if not isinstance(tool, FunctionTool):
            raise GenerateTaskError(
                "invalid_input", f"expected a FunctionTool, got {type(tool).__name__}"
            )
        if tool.name in self._tools and not replace:
            raise GenerateTaskError(
                "invalid_input",
                f"a tool named {tool.name!r} is already registered",
                details={"name": tool.name, "field": "name"},
            )
        self._tools[tool.name] = tool

    def unregister_function_tool(self, name: str) -> bool:
        """Remove the tool; ``False`` when there was none by that name."""
        return self._tools.pop(name, None) is not None

    def get(self, name: str) -> FunctionTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    async def tools(self, kind: str = "normal") -> list[FunctionTool]:
        """The tools offered to one generation of ``kind``: every tool whose
        ``should_register`` says yes now. Whether the kind may call tools at all is
        :func:`tavernkit.tools.capability.can_perform_tool_calls`'s question, not this one's;
        ``kind`` is accepted so callers read the same at both places."""
        offered = [tool for tool in list(self._tools.values()) if await _allowed(tool)]
        names = {tool.name for tool in offered}
        for source in self._sources:
            for tool in await source.tools(kind):
                if tool.name in names or tool.name in self._tools:
                    log.warning("tool %s of a tool source shadows another; left out", tool.name)
                    continue
                if await _allowed(tool):
                    names.add(tool.name)
                    offered.append(tool)
        return offered


def tools_from_specs(
    specs: Sequence[Mapping[str, Any] | FunctionTool],
    handlers: Mapping[str, ToolAction] | None = None,
) -> list[FunctionTool]:
    """Per-request tools from OpenAI ``{"type": "function", "function": {...}}`` entries
    (or flat ``{"name", "description", "parameters"}``), with optional handlers by name.

    Duplicate names and malformed entries are ``invalid_input``.
    """
    handlers = handlers or {}
    out: list[FunctionTool] = []
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        if isinstance(spec, FunctionTool):
            tool = spec
        elif isinstance(spec, Mapping):
            fn = spec.get("function", spec)
            if not isinstance(fn, Mapping):
                raise GenerateTaskError(
                    "invalid_input",
                    f"tools[{index}].function must be an object",
                    details={"field": f"tools[{index}].function"},
                )
            name = fn.get("name")
            description = fn.get("description") or ""
            parameters = fn.get("parameters")
            if parameters is None:
                parameters = _default_parameters()
            if not isinstance(description, str):
                raise GenerateTaskError(
                    "invalid_input",
                    f"tools[{index}].description must be a string",
                    details={"field": f"tools[{index}].description"},
                )
            tool = FunctionTool(
                name=check_tool_name(name),
                description=description,
                parameters=parameters,
                action=handlers.get(name) if isinstance(name, str) else None,
            )
        else:
            raise GenerateTaskError(
                "invalid_input",
                f"tools[{index}] must be an object, got {type(spec).__name__}",
                details={"field": f"tools[{index}]"},
            )
        if tool.name in seen:
            raise GenerateTaskError(
                "invalid_input",
                f"duplicate tool name {tool.name!r} in tools",
                details={"name": tool.name, "field": f"tools[{index}].name"},
            )
        seen.add(tool.name)
        out.append(tool)
    return out
