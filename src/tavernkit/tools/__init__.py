"""tavernkit.tools: function tools, the tool loop, the prompt protocols, structured output.

Pure and provider-independent: nothing here sends a request. ``generate_task`` and the turn
runner wire these pieces to a model.
"""

from tavernkit.tools._catalogue import ToolLike, render_tool_guide
from tavernkit.tools.calls import ToolCall, coerce_tool_call, decode_arguments
from tavernkit.tools.capability import (
    GenerationKind,
    ToolCapabilities,
    can_perform_tool_calls,
    is_tool_calling_supported,
)
from tavernkit.tools.errors import (
    SchemaIssue,
    StructuredOutputError,
    ToolArgumentsError,
    ToolCallParseError,
)
from tavernkit.tools.identity import call_identity, canonical_json
from tavernkit.tools.loop import (
    InvocationRecord,
    ToolLoopResult,
    execute_tool_calls,
    result_text,
    run_tool_loop,
)
from tavernkit.tools.modes import (
    FunctionCallMode,
    FunctionCallOptions,
    ResolvedMode,
    make_trigger_signal,
    resolve_function_call_mode,
)
from tavernkit.tools.prompt_json import JsonProtocol
from tavernkit.tools.prompt_xml import XmlProtocol
from tavernkit.tools.protocol import ParsedReply, PromptProtocol
from tavernkit.tools.registry import FunctionTool, ToolRegistry, check_tool_name, tools_from_specs
from tavernkit.tools.scan import StreamDetector, split_at_trigger
from tavernkit.tools.structured import (
    StructuredResult,
    parse_structured,
    schema_instruction,
    unwrap_json_schema,
)
from tavernkit.tools.validate import (
    ToolChoiceSpec,
    enforce_tool_choice,
    is_tool_call_mandatory,
    normalize_tool_choice,
    resolve_required_function_name,
    validate_arguments,
    validate_calls,
)

__all__ = [
    "FunctionCallMode",
    "FunctionCallOptions",
    "FunctionTool",
    "GenerationKind",
    "InvocationRecord",
    "JsonProtocol",
    "ParsedReply",
    "PromptProtocol",
    "ResolvedMode",
    "SchemaIssue",
    "StreamDetector",
    "StructuredOutputError",
    "StructuredResult",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallParseError",
    "ToolCapabilities",
    "ToolChoiceSpec",
    "ToolLike",
    "ToolLoopResult",
    "ToolRegistry",
    "XmlProtocol",
    "call_identity",
    "can_perform_tool_calls",
    "canonical_json",
    "check_tool_name",
    "coerce_tool_call",
    "decode_arguments",
    "enforce_tool_choice",
    "execute_tool_calls",
    "is_tool_call_mandatory",
    "is_tool_calling_supported",
    "make_trigger_signal",
    "normalize_tool_choice",
    "parse_structured",
    "protocol_for",
    "render_tool_guide",
    "resolve_function_call_mode",
    "resolve_required_function_name",
    "result_text",
    "run_tool_loop",
    "schema_instruction",
    "split_at_trigger",
    "tools_from_specs",
    "unwrap_json_schema",
    "validate_arguments",
    "validate_calls",
]


def protocol_for(mode: str, trigger: str, *, style: str = "json_schema") -> PromptProtocol:
    """The prompt protocol of a resolved mode (``prompt_xml`` or ``prompt_json``)."""
    if mode == "prompt_json":
        return JsonProtocol(trigger, style=style)
    if mode == "prompt_xml":
        return XmlProtocol(trigger, style=style)
    raise ValueError(f"{mode!r} is not a prompt protocol mode")
