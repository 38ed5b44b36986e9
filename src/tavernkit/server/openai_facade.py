"""The OpenAI-compatible facade's engine: which models there are, and one completion as a
stream of deltas ending in a result, whichever kind of model the client named.

A model id is ``character/<name>`` (``character/<name>@<id>`` when the owner has two
characters of that name) or ``profile/<name>``:

- a **character**: the client's messages are the chat. They go through ``generate_task``
  with the character's card, the owner's persona and preset, world info scanned over those
  messages (``normal`` trigger) and macros, all server-side (:class:`CharacterContext` is the
  context of a character without a stored chat). The client's sampler fields do not apply:
  the preset's do, all but the reply's length (``max_tokens``, ``max_completion_tokens``).
- a **connection profile**: a proxy. The messages go as they are (no envelope, world info or
  macros) through the profile with its key rotation and fallback chain; the client's sampler
  fields (``temperature``, ``max_tokens``, ``stop``...) and tools go with them, and no
  preset's (what the client did not set, the upstream's defaults decide). ``profile/embedded``
  is the embedded offline model (the connection used when no profile is selected), listed
  unless a stored profile has that name.

Nothing is stored either way.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavernkit.context import LoudChats, TavernContext
from tavernkit.context.request_primitives import send_generation_request, send_streaming_request
from tavernkit.errors import NotFound
from tavernkit.facade import Tavern
from tavernkit.generation.profiles import EMBEDDED_PROFILE
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.state import ChatState
from tavernkit.runtime import Runtime
from tavernkit.store.chat_state import load_chat_state
from tavernkit.tasks import TaskDone, TaskReasoningDelta, TaskResult, TaskTextDelta

__all__ = [
    "CHARACTER_PREFIX",
    "PROFILE_PREFIX",
    "CharacterContext",
    "Delta",
    "FacadeCompletion",
    "FacadeModel",
    "ProxyContext",
    "complete",
    "completion_id",
    "list_models",
    "now",
    "resolve_model",
]

CHARACTER_PREFIX = "character/"
PROFILE_PREFIX = "profile/"

#: the request fields a proxied request keeps (the rest are the facade's or unsupported)
_PROXY_FIELDS = (
    "messages",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "max_completion_tokens",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "seed",
    "stop",
    "tools",
    "tool_choice",
)


@dataclass(frozen=True)
class FacadeModel:
    """One entry of ``/v1/models``: ``kind`` is ``character`` or ``profile``, ``ref`` the
    record's store id. ``profile``: a profile model's connection profile as
    :func:`resolve_model` read it (the completion sends with it, not reading it again; the
    store's shared model of that revision, so read-only)."""

    id: str
    kind: str
    ref: str
    name: str
    created: int
    profile: ConnectionProfile | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Delta:
    """A piece of the reply (``text``) or of its reasoning."""

    text: str = ""
    reasoning: str = ""


@dataclass
class FacadeCompletion:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None


class ProxyContext(TavernContext):
    """The context of a proxied completion: ``profile`` (already read) is what its name
    resolves to, so sending reads no profile; any other name (a fallback's) is read as
    usual."""

    def __init__(
        self, runtime: Runtime, profile: ConnectionProfile, *, chats: LoudChats | None = None
    ) -> None:
        super().__init__(runtime, None, chats=chats)
        self.profile = profile

    async def _profile(self, name: str) -> ConnectionProfile | None:
        if name == self.profile.name:
            return self.profile
        return await super()._profile(name)


class CharacterContext(TavernContext):
    """The context of a character without a stored chat: its state is the character's own
    (card, lorebooks) with the owner's persona, preset and settings, and no messages.
    ``chats``: the owner's chat service, whose shared route (a server's pool) the completion
    falls back to as a chat turn would."""

    def __init__(
        self, runtime: Runtime, character_id: str, *, chats: LoudChats | None = None
    ) -> None:
        super().__init__(runtime, None, chats=chats)
        self.character_id = character_id

    async def chat_state(self) -> ChatState:
        runtime = self.runtime
        return await load_chat_state(
            runtime.store, owner=runtime.owner, character=self.character_id
        )


def _embedded_model() -> FacadeModel:
    """``profile/embedded``: the connection a turn uses when no profile is selected (the
    embedded offline model), listed so that a fresh install has a model to proxy to."""
    name = EMBEDDED_PROFILE.name
    return FacadeModel(PROFILE_PREFIX + name, "profile", name, name, 0, EMBEDDED_PROFILE)


async def list_models(tk: Tavern) -> list[FacadeModel]:
    """The owner's characters, then connection profiles, each as a model id; the embedded
    model last, unless a stored profile has its name."""
    characters = await tk.store.list("character", owner=tk.owner)
    profiles = await tk.store.list("connection_profile", owner=tk.owner)
    counts: dict[str, int] = {}
    for info in characters:
        counts[info.name] = counts.get(info.name, 0) + 1
    models = [
        FacadeModel(
            CHARACTER_PREFIX + info.name + (f"@{info.id}" if counts[info.name] > 1 else ""),
            "character",
            info.id,
            info.name,
            int(info.created.timestamp()),
        )
        for info in characters
    ]
    models += [
        FacadeModel(
            PROFILE_PREFIX + info.name, "profile", info.id, info.name, int(info.created.timestamp())
        )
        for info in profiles
    ]
    if all(info.name != EMBEDDED_PROFILE.name for info in profiles):
        models.append(_embedded_model())
    return models


async def resolve_model(tk: Tavern, model: str) -> FacadeModel:
    """The model ``model`` names; :class:`~tavernkit.errors.NotFound` when the owner has no
    such character or profile."""
    missing = NotFound(f"The model {model!r} does not exist (see /v1/models)")
    if model.startswith(CHARACTER_PREFIX):
        kind, store_kind, rest = "character", "character", model[len(CHARACTER_PREFIX) :]
        name, at, ref = rest.rpartition("@")
        if not at:
            name, ref = rest, rest
    elif model.startswith(PROFILE_PREFIX):
        kind, store_kind = "profile", "connection_profile"
        name = ref = model[len(PROFILE_PREFIX) :]
    else:
        raise missing
    if kind == "profile":
        # the store's shared model of the profile's revision: every proxied completion names
        # one, and reading its revision is cheaper than reading and validating it again
        try:
            shared = await tk.store.get_shared_record(store_kind, ref, owner=tk.owner)
        except NotFound:
            if name == EMBEDDED_PROFILE.name:
                return _embedded_model()
            raise missing from None
        profile = shared.model
        if not isinstance(profile, ConnectionProfile) or profile.name != name:
            raise missing
        created = int(shared.created.timestamp()) if shared.created is not None else 0
        return FacadeModel(model, kind, shared.id, name, created, profile)
    try:
        record = await tk.store.get_record(store_kind, ref, owner=tk.owner)
    except NotFound:
        raise missing from None
    if name != record.info.name:
        raise missing
    info = record.info
    return FacadeModel(model, kind, info.id, info.name, int(info.created.timestamp()))


async def complete(
    tk: Tavern, model: FacadeModel, body: Mapping[str, Any], *, stream: bool
) -> AsyncIterator[Delta | FacadeCompletion]:
    """The completion of ``body`` (an OpenAI chat-completion request) on ``model``: deltas as
    they come when ``stream``, then the :class:`FacadeCompletion`. Raises
    :class:`~tavernkit.errors.GenerateTaskError` (also after some deltas)."""
    messages: Sequence[Mapping[str, Any]] = body["messages"]
    if model.kind == "character":
        async for item in _character(tk, model, body, messages, stream=stream):
            yield item
    else:
        async for item in _proxy(tk, model, body, stream=stream):
            yield item


async def _character(
    tk: Tavern,
    model: FacadeModel,
    body: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    *,
    stream: bool,
) -> AsyncIterator[Delta | FacadeCompletion]:
    ctx = CharacterContext(tk.runtime, model.ref, chats=tk.chats)
    options: dict[str, Any] = {
        "include_character_card": True,
        "world_info_source": "task",
        "world_info_type": "normal",
    }
    if body.get("tools"):
        options["tools"] = body["tools"]
        options["tool_choice"] = body.get("tool_choice") or "auto"
    # the client's cap on the reply holds (the preset's other samplers decide the rest)
    cap = body.get("max_completion_tokens") or body.get("max_tokens")
    if cap is not None:
        options["response_length"] = cap
    if not stream:
        yield _task_completion(await ctx.generate_task(messages, **options))
        return
    task = ctx.generate_task_stream(messages, **options)
    try:
        async for event in task:
            if isinstance(event, TaskTextDelta):
                yield Delta(text=event.text)
            elif isinstance(event, TaskReasoningDelta):
                yield Delta(reasoning=event.text)
            elif isinstance(event, TaskDone):
                yield _task_completion(event.result)
    finally:
        task.cancel()  # the client left: nothing is stored, so nothing needs finishing


def _task_completion(result: TaskResult) -> FacadeCompletion:
    calls = [
        {"id": c.id or f"call_{i}", "type": "function", "function": _function(c.name, c.args)}
        for i, c in enumerate(result.tool_calls)
    ]
    usage = dict(result.usage) if result.usage else None
    return FacadeCompletion(
        text=result.assistant_text,
        reasoning=result.reasoning or "",
        tool_calls=calls,
        finish_reason="tool_calls" if calls else _finish(result.finish_reason),
        usage=usage,
    )


def _function(name: str, args: Mapping[str, Any]) -> dict[str, str]:
    return {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}


async def _proxy(
    tk: Tavern, model: FacadeModel, body: Mapping[str, Any], *, stream: bool
) -> AsyncIterator[Delta | FacadeCompletion]:
    if model.profile is not None:
        ctx: TavernContext = ProxyContext(tk.runtime, model.profile, chats=tk.chats)
    else:
        ctx = tk.context()
    data = {k: body[k] for k in _PROXY_FIELDS if body.get(k) is not None}
    if "max_completion_tokens" in data:
        data.setdefault("max_tokens", data.pop("max_completion_tokens"))
    if not stream:
        response = await send_generation_request(
            ctx,
            "normal",
            data,
            api_preset_name=model.name,
            request_scope="extension_internal",
            include_preset=False,
        )
        yield _response_completion(response)
        return
    chunks = send_streaming_request(
        ctx,
        "normal",
        data["messages"],
        api_preset_name=model.name,
        request_scope="extension_internal",
        tools=data.get("tools"),
        tool_choice=data.get("tool_choice", "auto"),
        data=data,
        include_preset=False,
    )
    reasoning = ""
    async for chunk in chunks:
        if chunk.reasoning != reasoning and chunk.reasoning.startswith(reasoning):
            yield Delta(reasoning=chunk.reasoning[len(reasoning) :])
            reasoning = chunk.reasoning
        if chunk.delta:
            yield Delta(text=chunk.delta)
        if chunk.done and chunk.response is not None:
            yield _response_completion(chunk.response)


def _response_completion(response: Mapping[str, Any]) -> FacadeCompletion:
    choice = (response.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    usage = response.get("usage")
    return FacadeCompletion(
        text=str(message.get("content") or ""),
        reasoning=str(message.get("reasoning_content") or ""),
        tool_calls=list(message.get("tool_calls") or []),
        finish_reason=_finish(choice.get("finish_reason")),
        usage=dict(usage) if usage else None,
    )


#: tavernkit's unified finish reasons as OpenAI's (which has no pause, refusal or abort)
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}


def _finish(reason: str | None) -> str:
    if reason in ("content_filter", "refusal"):
        return "content_filter"
    return _FINISH.get(reason or "stop", "stop")


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())
