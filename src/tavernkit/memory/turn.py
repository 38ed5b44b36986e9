"""Memory for one generation, in SillyTavern's order (its ``vectors_rearrangeChat``
interceptor, then Summarize's injection): one call the prompt preparation makes before the
world-info scan.

1. The prompt's chat is the stored chat without system messages.
2. Vectorized world info: the ``"world.uid"`` keys to force-activate in the scan.
3. Chat memory: the collection is brought up to date (the messages before the newest one:
   SillyTavern indexes the new message only after the generation), then older messages are
   recalled into ``3_vectors`` and left out of the history.
4. The current summary becomes ``1_memory``.

Vectors do not run for ``quiet`` generations or dry runs, as in SillyTavern (a preview shows
the summary but no recall); the summary is injected for every kind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tavernkit.memory.chat_memory import VECTORS_KEY, recall, sync_chat
from tavernkit.memory.collections import VectorCollections
from tavernkit.memory.summary import MEMORY_KEY, latest_summary, summary_prompt
from tavernkit.memory.vectorized import vectorized_activations
from tavernkit.models.chat import Message
from tavernkit.models.memory import MemorySettings
from tavernkit.prompt.state import ExtensionPrompt, PromptState

if TYPE_CHECKING:
    from tavernkit.models.state import ChatState
    from tavernkit.prompt.pipeline import PromptSession

__all__ = ["MemoryStep", "TurnMemory", "apply_memory"]


@dataclass(frozen=True, slots=True)
class MemoryStep:
    """The generation's state with memory applied, and the world-info keys to activate."""

    state: PromptState
    force_activate: frozenset[str] = frozenset()
    recalled: tuple[Message, ...] = ()
    prompts: dict[str, ExtensionPrompt] = field(default_factory=dict)

    def chat_state(self, state: ChatState) -> ChatState:
        """``state`` with the recalled messages left out of its chat (what the prompt
        builder reads)."""
        if not self.recalled or state.chat is None:
            return state
        gone = {id(m) for m in self.recalled}
        kept = [m for m in state.chat.messages if id(m) not in gone]
        return state.model_copy(update={"chat": state.chat.model_copy(update={"messages": kept})})

    def session(self, session: PromptSession) -> PromptSession:
        """``session`` building from the memory-applied state (its card not yet evaluated:
        nothing before the scan reads it)."""
        if self.state is session.prompt_state:
            return session
        return dataclasses.replace(
            session, state=self.chat_state(session.state), prompt_state=self.state
        )

    def scan_options(self) -> dict[str, Any]:
        """Keyword arguments for ``worldinfo.scan``."""
        return {"force_activate": self.force_activate} if self.force_activate else {}


class TurnMemory(Protocol):
    """What the turn preparation calls (``chat.memory_setup.ChatMemory``)."""

    async def __call__(
        self,
        state: ChatState,
        prompt_state: PromptState,
        substitute: Callable[[str], str],
        *,
        owner: str,
        kind: str,
        dry_run: bool,
        compat: str,
    ) -> MemoryStep: ...


async def apply_memory(
    state: PromptState,
    settings: MemorySettings,
    *,
    books: Sequence[Any] = (),
    collections: VectorCollections | None,
    chat_collection: str | None,
    substitute: Callable[[str], str],
    kind: str = "normal",
    dry_run: bool = False,
    compat: bool = True,
) -> MemoryStep:
    """Apply memory to ``state`` (see the module docstring). ``collections`` may be None
    when vectors are off; ``chat_collection`` names the chat's collection (None: no chat)."""
    vectors = settings.vectors
    summary = settings.summary
    if not vectors.active and summary.source != "main":
        return MemoryStep(state)  # the chat is not read at all
    messages = list(state.messages)
    stored = messages
    prompts: dict[str, ExtensionPrompt] = {}
    keys: frozenset[str] = frozenset()
    recalled: tuple[Message, ...] = ()
    if vectors.active and collections is not None and kind != "quiet" and not dry_run:
        core = [m for m in messages if not m.is_system or m.extra.tool_invocations]
        if vectors.enabled_world_info and books:
            keys = await vectorized_activations(
                books, core, vectors, collections, substitute, compat=compat
            )
        if vectors.enabled_chats and chat_collection is not None:
            await sync_chat(collections, chat_collection, messages[:-1], vectors, substitute)
            result = await recall(
                core, vectors, collections, chat_collection, substitute, compat=compat
            )
            if result.prompt is not None:
                gone = {id(m) for m in core} - {id(m) for m in result.messages}
                messages = [m for m in messages if id(m) not in gone]
                prompts[VECTORS_KEY] = result.prompt
                recalled = result.recalled
    if summary.source == "main":
        # from the chat as stored: a recalled message may be the one holding the summary
        text = latest_summary(stored)
        injected = summary_prompt(text, summary, substitute) if text else None
        if injected is not None:
            prompts[MEMORY_KEY] = injected
    if not prompts and not keys:
        return MemoryStep(state)
    new_state = state.replace(
        messages=messages, extension_prompts={**state.extension_prompts, **prompts}
    )
    return MemoryStep(new_state, keys, recalled, prompts)
