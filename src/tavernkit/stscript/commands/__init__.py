"""The built-in commands, by family (each module's ``register`` adds its own)."""

from __future__ import annotations

from tavernkit.stscript.commands import (
    chat,
    flow,
    generation,
    questions,
    quick_replies,
    regex,
    text,
    variables,
)
from tavernkit.stscript.registry import CommandRegistry

__all__ = ["register_builtins"]


def register_builtins(registry: CommandRegistry) -> CommandRegistry:
    """Add every built-in command to ``registry``; returns it."""
    for module in (flow, variables, text, chat, generation, quick_replies, regex, questions):
        module.register(registry)
    return registry
