"""The prompt inspector: what the next turn would send, block by block.

It reads a :class:`~tavernkit.chat.prepare.PreparedTurn` made by the same code a turn runs (as
a dry run), so the request shown is the request sent: the wire body comes from the
connection's own adapter. Each block says where it came from (preset entry, lorebook entry and
why it fired, chat message, injection) with its token count, against the context budget.
"""

from __future__ import annotations

from typing import Any

from tavernkit.chat.prepare import PreparedTurn
from tavernkit.prompt import assembled as built
from tavernkit.providers.base import Adapter
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    MessageLabel,
    PromptRequest,
    WireImagePart,
    WireTextPart,
)

__all__ = ["inspection", "wire_body"]


def _message_json(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if isinstance(message.content, str):
        out["content"] = message.content
    else:
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, WireTextPart):
                parts.append({"type": "text", "text": part.text})
            elif isinstance(part, WireImagePart):
                parts.append({"type": "image_url", "image_url": {"url": part.url or "<data>"}})
        out["content"] = parts
    if message.name:
        out["name"] = message.name
    return out


def wire_body(
    prepared: PreparedTurn, *, stream: bool = True, request: PromptRequest | None = None
) -> dict[str, Any]:
    """The JSON body the connection's adapter sends for the prepared request (or for
    ``request``). The embedded model has no HTTP adapter; its request is shown in the OpenAI
    shape."""
    connection = prepared.connection
    request = prepared.request if request is None else request
    adapter = getattr(connection.provider, "adapter", None)
    if isinstance(adapter, Adapter):
        wire = adapter.build_request(
            request,
            model=connection.model,
            stream=stream,
            profile=connection.model_profile,
        )
        return dict(wire.body)
    body: dict[str, Any] = {"model": connection.model}
    if isinstance(request, ChatPrompt):
        body["messages"] = [_message_json(m) for m in request.messages]
    else:
        body["prompt"] = request.prompt
    if request.stop:
        body["stop"] = list(request.stop)
    if request.sampling.max_tokens is not None:
        body["max_tokens"] = request.sampling.max_tokens
    return body


def _why(prepared: PreparedTurn) -> dict[str, dict[str, Any]]:
    """Activated lorebook entries by ``"<world>.<uid>"``: what they are and why they fired.

    The reason is the scan's own record when the scan ran with ``explain=True`` (the key that
    matched, the secondary keys, constant, sticky, recursion level); a scan without it only
    tells which keys *can* fire the entry, so that is what is shown then."""
    out: dict[str, dict[str, Any]] = {}
    wi = prepared.wi
    if wi is None:
        return out
    for entry in wi.activated:
        wire = entry.wire
        reason = wi.explain.get(entry.key) if wi.explain is not None else None
        row: dict[str, Any] = {
            "world": entry.world,
            "uid": entry.uid,
            "comment": wire.get("comment") or "",
            "position": entry.position,
            "depth": entry.depth,
        }
        if reason is not None:
            why = reason.detail
            if reason.loop:
                why += f" (recursion level {reason.loop})"
            row.update(why=why, reason=reason.reason, loop=reason.loop)
            if reason.primary_key is not None:
                row["matched_key"] = reason.primary_key
        else:
            constant = bool(wire.get("constant"))
            keys = [k for k in (wire.get("key") or wire.get("keys") or []) if isinstance(k, str)]
            row["why"] = (
                "constant" if constant else ("keys: " + ", ".join(keys) if keys else "matched")
            )
        row["content"] = entry.content
        out[f"{entry.world}.{entry.uid}"] = row
    return out


def inspection(prepared: PreparedTurn) -> dict[str, Any]:
    """The inspector's JSON: the connection, the blocks with sources and token counts, the
    budget, the lorebook entries that fired and the exact wire body. When plugins' hooks
    changed the request, ``request`` is theirs (what is sent) and ``request_as_built`` the
    prompt builder's, which the blocks describe."""
    prompt = prepared.prompt
    connection = prepared.connection
    blocks: list[dict[str, Any]] = []
    total = budget = 0
    as_built = prepared.built_request if prepared.built_request is not None else prepared.request
    if isinstance(prompt, built.AssembledText):
        total, budget = prompt.token_count, prompt.budget
        for name, text in prompt.sections:
            blocks.append({"identifier": name, "source": name, "content": text})
    else:
        # The rows are the labelled messages of the request the turn runs (the same object
        # the runner trims per attempt), not a second reading of the builder's blocks.
        budget = prompt.budget
        messages = as_built.messages if isinstance(as_built, ChatPrompt) else ()
        for message in messages:
            label = message.label or MessageLabel(kind="control", identifier="added")
            total += label.tokens
            blocks.append(
                {
                    "identifier": label.identifier,
                    "source": label.kind,
                    "role": message.role,
                    "tokens": label.tokens,
                    "message_index": label.message_index,
                    "entries": list(label.entries),
                    "content": _message_json(message)["content"],
                }
            )
    data: dict[str, Any] = {
        "chat_id": prepared.state.chat_id,
        "kind": prompt.kind,
        "profile": connection.profile.name,
        "api": prepared.main_api,
        "source": connection.source,
        "model": connection.model,
        "total_tokens": total,
        "budget": budget,
        "blocks": blocks,
        "lorebook": _why(prepared),
        "request": wire_body(prepared),
    }
    if prepared.built_request is not None:
        data["request_as_built"] = wire_body(prepared, request=prepared.built_request)
    return data
