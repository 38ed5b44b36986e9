"""What the stages of one text-completion build (:mod:`tavernkit.prompt.text_completion`)
read alike: the state, the macro substitute, the names, the templates and the generation type."""

from __future__ import annotations

from dataclasses import dataclass

from tavernkit.models.templates import ContextTemplate, InstructTemplate
from tavernkit.prompt.instruct import InstructNames
from tavernkit.prompt.state import PromptState, Substitute

__all__ = ["TextFrame"]


@dataclass(frozen=True, slots=True)
class TextFrame:
    """What the stages of one text-completion build read alike."""

    state: PromptState
    sub: Substitute
    names: InstructNames
    context: ContextTemplate
    #: the instruct template (its defaults when none is set); used only when ``is_instruct``
    instruct: InstructTemplate
    is_instruct: bool
    kind: str
