"""Shared tools for the protocol tests."""

from __future__ import annotations

from tavernkit.tools import FunctionTool

TRIGGER = "<Function_Ab12_Start/>"

SEARCH = FunctionTool(
    name="search_web",
    description="Search the web.",
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "what to look for"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)
NOTE = FunctionTool(
    name="take-note",
    description="Store a note.",
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        },
        "required": ["text"],
    },
)
TOOLS = [SEARCH, NOTE]
