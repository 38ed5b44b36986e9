"""Quick replies: SillyTavern's Quick Reply sets (``QuickReplySet`` version 2).

A set is ``{"version": 2, "name", "disableSend", "placeBeforeInput", "injectInput", "color",
"onlyBorderColor", "qrList": [...], "idIndex"}``; each reply has an ``id``, a ``label`` (the
button), a ``message`` (text to send, or an STscript when it starts with ``/``), display fields
and the auto-execution flags. Files are read as they are (unknown keys kept, key order kept);
:meth:`QuickReplySet.st_json` writes SillyTavern's export (its ``toJSON``: every key, in its
order), so a set exported by SillyTavern and imported here exports byte for byte the same
(:func:`QuickReplySet.export_text`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from tavernkit.models.base import WireModel

__all__ = ["QuickReply", "QuickReplyContext", "QuickReplySet"]

#: SillyTavern's ``QuickReply.toJSON`` keys, in order (attribute names here in brackets).
_QR_KEYS = (
    ("id", "id"),
    ("icon", "icon"),
    ("showLabel", "show_label"),
    ("label", "label"),
    ("title", "title"),
    ("message", "message"),
    ("contextList", "context_list"),
    ("preventAutoExecute", "prevent_auto_execute"),
    ("isHidden", "is_hidden"),
    ("executeOnStartup", "execute_on_startup"),
    ("executeOnUser", "execute_on_user"),
    ("executeOnAi", "execute_on_ai"),
    ("executeOnChatChange", "execute_on_chat_change"),
    ("executeOnGroupMemberDraft", "execute_on_group_member_draft"),
    ("executeOnNewChat", "execute_on_new_chat"),
    ("executeBeforeGeneration", "execute_before_generation"),
    ("automationId", "automation_id"),
)
_SET_KEYS = (
    ("version", "version"),
    ("name", "name"),
    ("disableSend", "disable_send"),
    ("placeBeforeInput", "place_before_input"),
    ("injectInput", "inject_input"),
    ("color", "color"),
    ("onlyBorderColor", "only_border_color"),
    ("qrList", "qr_list"),
    ("idIndex", "id_index"),
)


class QuickReplyContext(WireModel):
    """A context-menu link of a reply to another set (``contextList[]``)."""

    set: str = ""
    is_chained: bool = Field(default=False, alias="isChained")


class QuickReply(WireModel):
    """One button of a set."""

    id: int = 0
    icon: str = ""
    show_label: bool = Field(default=False, alias="showLabel")
    label: str = ""
    title: str = ""
    #: the text to send, or an STscript (a message starting with ``/``)
    message: str = ""
    context_list: list[QuickReplyContext] = Field(default_factory=list, alias="contextList")
    prevent_auto_execute: bool = Field(default=True, alias="preventAutoExecute")
    is_hidden: bool = Field(default=False, alias="isHidden")
    execute_on_startup: bool = Field(default=False, alias="executeOnStartup")
    execute_on_user: bool = Field(default=False, alias="executeOnUser")
    execute_on_ai: bool = Field(default=False, alias="executeOnAi")
    execute_on_chat_change: bool = Field(default=False, alias="executeOnChatChange")
    execute_on_group_member_draft: bool = Field(default=False, alias="executeOnGroupMemberDraft")
    execute_on_new_chat: bool = Field(default=False, alias="executeOnNewChat")
    execute_before_generation: bool = Field(default=False, alias="executeBeforeGeneration")
    automation_id: str = Field(default="", alias="automationId")

    def st_json(self) -> dict[str, Any]:
        """SillyTavern's ``toJSON`` of the reply (every key in its order, then unknown ones)."""
        out: dict[str, Any] = {}
        for key, attr in _QR_KEYS:
            value = getattr(self, attr)
            if attr == "context_list":
                value = [
                    {"set": c.set, "isChained": c.is_chained, **(c.model_extra or {})}
                    for c in value
                ]
            out[key] = value
        out.update(self.model_extra or {})
        return out


class QuickReplySet(WireModel):
    """A named set of replies, with how its buttons send (``disableSend``,
    ``placeBeforeInput``, ``injectInput``) and look (``color``, ``onlyBorderColor``)."""

    version: int = 2
    name: str = ""
    disable_send: bool = Field(default=False, alias="disableSend")
    place_before_input: bool = Field(default=False, alias="placeBeforeInput")
    inject_input: bool = Field(default=False, alias="injectInput")
    color: str = "transparent"
    only_border_color: bool = Field(default=False, alias="onlyBorderColor")
    qr_list: list[QuickReply] = Field(default_factory=list, alias="qrList")
    id_index: int = Field(default=0, alias="idIndex")

    def st_json(self) -> dict[str, Any]:
        """SillyTavern's ``toJSON`` of the set: what its export button writes."""
        out: dict[str, Any] = {}
        for key, attr in _SET_KEYS:
            value = getattr(self, attr)
            out[key] = [qr.st_json() for qr in value] if attr == "qr_list" else value
        out.update(self.model_extra or {})
        return out

    def export_text(self) -> str:
        """The exported file: one line of JSON, as SillyTavern downloads it."""
        return json.dumps(self.st_json(), ensure_ascii=False, separators=(",", ":"))

    def add(self, **fields: Any) -> QuickReply:
        """A new reply at the end, with the next id (SillyTavern counts ids up by two)."""
        next_id = max([self.id_index, *(qr.id for qr in self.qr_list)]) + 2
        self.id_index = next_id
        reply = QuickReply.create(id=next_id, **fields)
        self.qr_list.append(reply)
        return reply

    def find(self, label: str | int) -> QuickReply | None:
        """The reply with this label, or with this id when ``label`` is an int."""
        if isinstance(label, int):
            return next((qr for qr in self.qr_list if qr.id == label), None)
        return next((qr for qr in self.qr_list if qr.label == label), None)
