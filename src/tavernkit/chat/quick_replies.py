"""Quick replies: saved messages (or slash-command macros) sent with one command.

They live in one stored Quick Reply set per owner (``Default`` unless told otherwise), in
SillyTavern's format. A reply's message is plain text to send, or lines of slash commands
(each line starting with ``/`` is a command; a front end runs them in order). Labels are one
word, unique within the set.
"""

from __future__ import annotations

from tavernkit.errors import FormatError, NotFound
from tavernkit.models.quick_reply import QuickReply, QuickReplySet
from tavernkit.store.protocol import Store

__all__ = ["DEFAULT_SET", "QuickReplies", "quick_reply_lines"]

DEFAULT_SET = "Default"
KIND = "quick_reply_set"


def quick_reply_lines(message: str) -> tuple[bool, list[str]]:
    """What to run for a reply: ``(True, command lines)`` when every line is a slash command,
    else ``(False, [the whole text])``, one message to send."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if lines and all(line.startswith("/") for line in lines):
        return True, lines
    return False, [message.strip()] if message.strip() else []


class QuickReplies:
    """One owner's quick replies in the set ``set_name``."""

    def __init__(self, store: Store, *, owner: str, set_name: str = DEFAULT_SET) -> None:
        self.store = store
        self.owner = owner
        self.set_name = set_name

    async def _load(self) -> tuple[str | None, QuickReplySet]:
        try:
            stored = await self.store.get_record(KIND, self.set_name, owner=self.owner)
        except NotFound:
            return None, QuickReplySet(name=self.set_name)
        return stored.info.id, QuickReplySet.model_validate(stored.data)

    async def list(self) -> list[QuickReply]:
        return list((await self._load())[1].qr_list)

    async def get(self, label: str) -> QuickReply:
        for reply in await self.list():
            if reply.label == label:
                return reply
        raise NotFound(f"no quick reply {label!r} (/qr lists them)")

    async def save(self, label: str, message: str) -> QuickReply:
        """Add a reply, or replace the one with that label."""
        if not label or any(c.isspace() for c in label):
            raise FormatError("a quick reply's label is one word", field="label")
        if not message.strip():
            raise FormatError("a quick reply needs a message", field="message")
        record_id, qr_set = await self._load()
        reply = QuickReply(label=label, message=message)
        kept = [r for r in qr_set.qr_list if r.label != label]
        qr_set.qr_list = [*kept, reply]
        await self.store.put(KIND, qr_set, owner=self.owner, name=self.set_name, id=record_id)
        return reply

    async def remove(self, label: str) -> None:
        record_id, qr_set = await self._load()
        kept = [r for r in qr_set.qr_list if r.label != label]
        if record_id is None or len(kept) == len(qr_set.qr_list):
            raise NotFound(f"no quick reply {label!r} (/qr lists them)")
        qr_set.qr_list = kept
        await self.store.put(KIND, qr_set, owner=self.owner, name=self.set_name, id=record_id)
