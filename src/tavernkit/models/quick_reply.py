"""Quick replies: saved messages a user sends with one command (SillyTavern's Quick Reply
sets: ``{"version": 2, "name": ..., "qrList": [{"label": ..., "message": ...}]}``; fields
we do not use are kept for a round trip)."""

from __future__ import annotations

from pydantic import Field

from tavernkit.models._base import WireModel

__all__ = ["QuickReply", "QuickReplySet"]


class QuickReply(WireModel):
    label: str = ""
    #: the text to send, or slash commands (lines starting with ``/``)
    message: str = ""


class QuickReplySet(WireModel):
    version: int = 2
    name: str = ""
    qr_list: list[QuickReply] = Field(default_factory=list, alias="qrList")
