"""Replays a memory golden (conformance README §6) through tavernkit's memory and prompt
engines, with the recorder's mock embeddings.

One case is up to two user turns on one chat, as the recorder drove SillyTavern: "Vectorize
All" first (chat-vector cases), then each turn: the user message is appended, memory is
applied (``memory.apply_memory``: vectorized world info, chat recall, the summary), the
prompt is built (``prompt.st_replay``), the mock reply is appended, and the Summarize gate
decides whether a summary request follows (its prompt built by the Raw builder -- messages on
chat completion, the instruct/context-formatted prompt on text completion -- or by a quiet
generation for Classic); the mock's summary text is then stored where SillyTavern stores it.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavernkit.memory.chat_memory import sync_chat
from tavernkit.memory.collections import VectorCollections
from tavernkit.memory.summary import (
    raw_summary_request,
    summary_due,
    summary_target,
    summary_task_prompt,
)
from tavernkit.memory.turn import apply_memory
from tavernkit.models.chat import Message
from tavernkit.models.memory import MemorySettings, SummarySettings, VectorSettings
from tavernkit.prompt.assembled import AssembledChat as ChatPrompt
from tavernkit.prompt.assembled import AssembledText as TextPrompt
from tavernkit.prompt.macros import macro_substitute
from tavernkit.prompt.st_replay import Replay, prepare_replay
from tavernkit.worldinfo import scan as wi_scan

from .adapters import COMPAT, PromptOutcome
from .mock_embedder import MockEmbedder

REPLY = "Fixed oracle reply."
SUMMARY = "Oracle summary: the party reached the river fort and the dragon was sighted."
CHAT_COLLECTION = "chat"


@dataclass
class Generation:
    """One request tavernkit would send: the user's generation or a summary."""

    kind: str  # "generation" | "summary"
    outcome: PromptOutcome


@dataclass
class MemoryRun:
    generations: list[Generation] = field(default_factory=list)
    #: every batch embedded before the first reply (the index phase and gen 1's queries)
    embedded_before_reply: list[str] = field(default_factory=list)
    chat: list[dict[str, Any]] = field(default_factory=list)


def _outcome(result: ChatPrompt | TextPrompt) -> PromptOutcome:
    if isinstance(result, ChatPrompt):
        return PromptOutcome(messages=result.messages)
    return PromptOutcome(prompt=result.prompt, stop=list(result.stop))


def _message(name: str, text: str, *, is_user: bool) -> dict[str, Any]:
    return {"name": name, "is_user": is_user, "is_system": False, "mes": text, "extra": {}}


def settings_of(inputs: Mapping[str, Any]) -> MemorySettings:
    return MemorySettings(
        vectors=VectorSettings.model_validate(inputs.get("vectors_settings") or {}),
        summary=SummarySettings.model_validate(inputs.get("memory_settings") or {}),
    )


async def _generate(
    inputs: Mapping[str, Any],
    effective: Mapping[str, Any],
    chat: list[dict[str, Any]],
    settings: MemorySettings,
    collections: VectorCollections,
    *,
    kind: str = "normal",
    quiet_prompt: str = "",
) -> ChatPrompt | TextPrompt:
    case_inputs = {**inputs, "chat": chat}
    replay = prepare_replay(case_inputs, effective, compat=COMPAT)
    substitute = macro_substitute(replay.state, compat=COMPAT)
    step = await apply_memory(
        replay.state,
        settings,
        books=replay.books,
        collections=collections,
        chat_collection=CHAT_COLLECTION,
        substitute=substitute,
        kind=kind,
        compat=True,
    )
    run = Replay(step.state, replay.books, replay.wi_settings, replay.avatar, replay.compat)
    scan = functools.partial(wi_scan, **step.scan_options()) if replay.books else None
    return run.run(kind=kind, quiet_prompt=quiet_prompt, scan=scan)


def _messages(chat: Sequence[Mapping[str, Any]]) -> list[Message]:
    return [Message.model_validate(m) for m in chat]


async def _maybe_summarize(
    inputs: Mapping[str, Any],
    effective: Mapping[str, Any],
    chat: list[dict[str, Any]],
    settings: MemorySettings,
    collections: VectorCollections,
    run: MemoryRun,
) -> None:
    summary = settings.summary
    messages = _messages(chat)
    if not summary_due(messages, summary):
        return
    replay = prepare_replay({**inputs, "chat": chat}, effective, compat=COMPAT)
    substitute = macro_substitute(replay.state, compat=COMPAT)
    last_used = -1
    if summary.prompt_builder in (1, 2):
        counter = replay.default_tokenizer()
        preset = replay.state.preset
        context = (
            preset.openai_max_context if preset is not None else replay.state.settings.max_context
        )
        response = summary.override_response_length or (
            preset.openai_max_tokens if preset is not None else replay.state.settings.amount_gen
        )
        request = raw_summary_request(
            messages,
            summary,
            substitute,
            count_tokens=counter.count,
            max_prompt_tokens=context - response,
        )
        if request is None:
            return
        last_used = request.last_used
        # generateRaw's request in the API's own shape: messages, or the formatted prompt
        if replay.is_chat:
            outcome = PromptOutcome(messages=request.messages())
        else:
            text = request.text_prompt(replay.state, substitute)
            outcome = PromptOutcome(prompt=text.prompt, stop=list(text.stop))
        run.generations.append(Generation("summary", outcome))
    else:
        prompt = summary_task_prompt(summary, substitute)
        result = await _generate(
            inputs, effective, chat, settings, collections, kind="quiet", quiet_prompt=prompt
        )
        run.generations.append(Generation("summary", _outcome(result)))
    target = summary_target(messages, summary, last_used)
    chat[target] = {
        **chat[target],
        "extra": {**(chat[target].get("extra") or {}), "memory": SUMMARY},
    }


async def run_memory_case(case: Mapping[str, Any]) -> MemoryRun:
    """Every request of one case, in order, and what was embedded before the first reply."""
    inputs = copy.deepcopy(dict(case["inputs"]))
    effective = case.get("effective_settings") or {}
    settings = settings_of(inputs)
    embedder = MockEmbedder()
    collections = VectorCollections(embedder)
    chat: list[dict[str, Any]] = list(inputs["chat"])
    replay = prepare_replay(inputs, effective, compat=COMPAT)
    user = replay.state.user
    char = replay.state.char
    run = MemoryRun()
    if settings.vectors.enabled_chats:  # "Vectorize All"
        substitute = macro_substitute(replay.state, compat=COMPAT)
        await sync_chat(collections, CHAT_COLLECTION, _messages(chat), settings.vectors, substitute)
    for turn, user_input in enumerate(inputs["user_inputs"]):
        chat.append(_message(user, user_input, is_user=True))
        result = await _generate(inputs, effective, chat, settings, collections)
        run.generations.append(Generation("generation", _outcome(result)))
        if turn == 0:
            run.embedded_before_reply = [t for call in embedder.calls for t in call]
        chat.append(_message(char, REPLY, is_user=False))
        await _maybe_summarize(inputs, effective, chat, settings, collections, run)
    run.chat = chat
    return run
