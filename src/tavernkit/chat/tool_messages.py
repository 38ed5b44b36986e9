"""Tool invocations in the transcript, stored the way SillyTavern stores them.

SillyTavern's ``saveFunctionToolInvocations`` pushes one **system message** per tool round,
before the reply the round led to: ``name`` "SillyTavern System", ``force_avatar``
``img/five.png``, ``is_system: true``, a ``<details>`` summary as ``mes`` and
``extra: {isSmallSys, tool_invocations, api, model}``. The prompt builders turn such a message
back into an assistant ``tool_calls`` turn and its ``tool`` results in later prompts (and skip
it, as a hidden message, when tools are off). The reply itself carries no invocations: a
message with ``tool_invocations`` is sent as its tool calls *instead of* its text.

Stealth invocations are never stored (SillyTavern keeps them out of the chat), so they are
hidden from the transcript and from every later prompt. A turn that stores no reply (it
failed before showing anything, or its reply was only tool calls) stores no tool message
either: the chat never ends on a tool message where the next swipe or regeneration would
take it for the reply. Where we differ: when a reply with text follows a round that ran a
stealth tool beside ordinary ones, the ordinary ones are stored (SillyTavern drops the whole
round's record when it stops for the stealth tool, though those tools did run).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from tavernkit.models.chat import Message, MessageExtra
from tavernkit.tools.loop import InvocationRecord

__all__ = ["SYSTEM_AVATAR", "SYSTEM_USER_NAME", "tool_message", "visible_invocations"]

SYSTEM_USER_NAME = "SillyTavern System"
SYSTEM_AVATAR = "img/five.png"


def visible_invocations(records: Sequence[InvocationRecord]) -> list[InvocationRecord]:
    """The invocations the transcript keeps (every one but the stealth ones)."""
    return [r for r in records if not r.stealth]


def _json_or_text(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _summary(records: Sequence[InvocationRecord]) -> str:
    """``#formatToolInvocationMessage``: a ``<details>`` block, the tool names as its summary
    and the invocations as pretty JSON (parameters and results parsed where they are JSON)."""
    data = [
        {
            **r.to_tool_invocation().to_wire(),
            "parameters": _json_or_text(r.parameters),
            "result": _json_or_text(r.result),
        }
        for r in records
    ]
    names = ", ".join(r.display_name or r.name for r in records)
    code = html.escape(json.dumps(data, indent=2, ensure_ascii=False), quote=False)
    return (
        f"<details><summary>Tool calls: {html.escape(names, quote=False)}</summary>"
        f'<pre><code class="language-json">{code}</code></pre></details>'
    )


def tool_message(
    records: Sequence[InvocationRecord], *, api: str, model: str | None, send_date: str
) -> Message:
    """The system message recording ``records`` (non-stealth ones; see the module)."""
    extra = MessageExtra.model_validate(
        {
            "isSmallSys": True,
            "tool_invocations": [r.to_tool_invocation().to_wire() for r in records],
            "api": api,
            "model": model,
        }
    )
    message = Message.new(
        SYSTEM_USER_NAME,
        _summary(records),
        is_user=False,
        is_system=True,
        send_date=send_date,
        extra=extra,
    )
    message.force_avatar = SYSTEM_AVATAR
    return message
