"""A chat and its messages, in SillyTavern's shape (``ChatMessage`` of its ``.jsonl`` files).

The split: a SillyTavern chat file is one header object followed by one object per message, so
:class:`Chat` is an envelope holding a :class:`ChatHeader` (the first line: ``user_name``,
``character_name``, ``create_date``, ``chat_metadata``) and ``messages``. Header and messages are
:class:`WireModel` values that keep unknown keys and key order, so a file read and written back
has the same JSON on every line; :class:`Chat` itself is ours and closed.

Field names follow SillyTavern (``mes``, ``swipe_id``...) because every extension, script and
preset out there refers to them by these names. Two things are ours:

- ``mes`` may hold content *parts* (text and images) instead of a string, so multimodal input
  has a place. SillyTavern keeps images in ``extra.media`` instead; :meth:`Message.to_st`
  converts, and :meth:`Message.parts` reads both shapes.
- swipe helpers (:meth:`Message.add_swipe`, :meth:`Message.select_swipe`) keep the active
  swipe's text and info duplicated in ``mes`` and the top-level fields, as SillyTavern does,
  because every reader of a message looks only at the top level.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Annotated, Any, Literal, Self

from pydantic import Field, ModelWrapValidatorHandler, model_validator

from tavernkit.models.base import Number, ValueModel, WireModel
from tavernkit.models.profile import ReviewSettings
from tavernkit.models.send_date import parse_send_date

__all__ = [
    "LEGACY_REASONING_PLACEHOLDER",
    "Chat",
    "ChatHeader",
    "ChatMetadata",
    "ContentPart",
    "ImagePart",
    "MediaItem",
    "Message",
    "MessageExtra",
    "SendDate",
    "Swipe",
    "SwipeInfo",
    "TextPart",
    "TimedEffect",
    "TimedWorldInfo",
    "ToolInvocation",
]

#: ``send_date`` as found in files: ISO 8601 today, epoch milliseconds or a humanized string in
#: older chats. Kept as written so a round trip does not rewrite dates.
SendDate = str | Number

#: Older SillyTavern versions stored a zero-width space as "reasoning" to mark an empty block.
LEGACY_REASONING_PLACEHOLDER = "\u200b"

_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*)*;base64,(?P<data>.*)$", re.S)


# --- content parts ---------------------------------------------------------------------------


class _Part(WireModel):
    """Parts write their ``type`` first even when built as ``TextPart(text=...)``."""

    @model_validator(mode="wrap")
    @classmethod
    def _remember_key_order(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        # Replaces WireModel's validator of the same name so the filled-in type is in the order.
        if isinstance(data, dict) and "type" not in data:
            data = {"type": cls.model_fields["type"].default, **data}
        obj = handler(data)
        if isinstance(data, dict) and obj is not data:
            obj._key_order = tuple(data)
        return obj


class TextPart(_Part):
    """A piece of text in a multimodal message."""

    type: Literal["text"] = "text"
    text: str = ""


class ImagePart(_Part):
    """An image in a multimodal message: a URL (``http(s)``, ``data:`` or a path under the user's
    files) or inline base64 ``data`` with its ``mime`` type. ``detail`` is the OpenAI hint."""

    type: Literal["image_url", "image"] = "image_url"
    url: str | None = None
    data: str | None = None
    mime: str | None = None
    detail: str | None = None

    @model_validator(mode="after")
    def _needs_a_source(self) -> Self:
        if not self.url and not self.data:
            raise ValueError("an image part needs 'url' or 'data'")
        return self

    @property
    def data_url(self) -> str:
        """The image as one URL (inline data becomes a ``data:`` URL)."""
        if self.data:
            return f"data:{self.mime or 'application/octet-stream'};base64,{self.data}"
        return self.url or ""

    @classmethod
    def from_url(cls, url: str, *, detail: str | None = None) -> ImagePart:
        """An image part for ``url``; a base64 ``data:`` URL is split into ``data`` + ``mime``
        so the two shapes of the same image compare equal."""
        fields: dict[str, Any] = {"type": "image_url"}
        match = _DATA_URL.match(url)
        data = match.group("data") if match else None
        if match and data is not None and _is_base64(data):
            fields["data"] = data
            if match.group("mime"):
                fields["mime"] = match.group("mime")
        else:
            fields["url"] = url
        if detail is not None:
            fields["detail"] = detail
        return cls.model_validate(fields)


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


# --- message extras --------------------------------------------------------------------------


class ToolInvocation(WireModel):
    """One tool call of a message and its result (``extra.tool_invocations[]``). ``parameters``
    is the arguments' JSON text as the model sent it."""

    id: str | None = None
    name: str | None = None
    parameters: str | dict[str, Any] | None = None
    result: Any = None
    signature: str | None = None
    reasoning: str | None = None


class MediaItem(WireModel):
    """An attachment shown with a message (``extra.media[]``)."""

    url: str | None = None
    type: str | None = None
    title: str | None = None
    source: str | None = None
    append_title: bool | None = None


class MessageExtra(WireModel):
    """``message.extra``: generation facts, display overrides, reasoning, tools and media."""

    api: str | None = None
    model: str | None = None
    type: str | None = None
    gen_id: Number | str | None = None
    bias: str | None = None
    token_count: Number | None = None
    display_text: str | None = None
    reasoning_display_text: str | None = None
    is_small_sys: bool | None = Field(default=None, alias="isSmallSys")
    swipeable: bool | None = None
    reasoning: str | None = None
    reasoning_duration: Number | None = None
    reasoning_type: str | None = None
    reasoning_signature: str | None = None
    tool_invocations: list[ToolInvocation] | None = None
    media: list[MediaItem] | None = None
    media_display: str | None = None
    media_index: int | None = None
    files: list[Any] | None = None
    memory: str | None = None
    uses_system_ui: bool | None = None
    # deprecated single-image/file fields of older chats
    image: str | None = None
    file: Any = None
    image_swipes: list[str] | None = None
    append_title: bool | None = None
    inline_image: bool | None = None
    title: str | None = None


class SwipeInfo(WireModel):
    """What SillyTavern keeps per swipe, parallel to ``swipes`` (``swipe_info[]``)."""

    send_date: SendDate | None = None
    gen_started: SendDate | None = None
    gen_finished: SendDate | None = None
    extra: MessageExtra | None = None


@dataclass(frozen=True, slots=True)
class Swipe:
    """A view of one swipe: its index, text and info (``None`` when the file has none)."""

    index: int
    text: str
    info: SwipeInfo | None


# --- message ---------------------------------------------------------------------------------


class Message(WireModel):
    """One chat message (a line of a ``.jsonl`` chat after the header)."""

    name: str = ""
    is_user: bool = False
    is_system: bool = False
    send_date: SendDate | None = None
    mes: str | list[ContentPart] = ""
    gen_started: SendDate | None = None
    gen_finished: SendDate | None = None
    force_avatar: str | None = None
    original_avatar: str | None = None
    title: str | None = None
    swipes: list[str] | None = None
    swipe_id: int | None = None
    swipe_info: list[SwipeInfo | None] | None = None
    extra: MessageExtra = Field(default_factory=MessageExtra)

    @classmethod
    def new(
        cls,
        name: str,
        content: str | list[TextPart | ImagePart],
        *,
        is_user: bool,
        send_date: SendDate | None = None,
        is_system: bool = False,
        extra: MessageExtra | None = None,
    ) -> Message:
        """A new message with the fields, and in the order, SillyTavern writes for one it
        creates (bot replies then get their first swipe with :meth:`ensure_swipes`)."""
        fields: dict[str, Any] = {"name": name, "is_user": is_user, "is_system": is_system}
        if send_date is not None:
            fields["send_date"] = send_date
        fields["mes"] = content
        fields["extra"] = extra if extra is not None else MessageExtra()
        return cls.model_validate(fields)

    # --- content ---

    @property
    def content(self) -> str | list[TextPart | ImagePart]:
        """The message content: a string, or text and image parts."""
        return self.mes

    @property
    def text(self) -> str:
        """The text of the message; the text parts joined with ``"\\n"`` for multimodal ones."""
        if isinstance(self.mes, str):
            return self.mes
        return "\n".join(p.text for p in self.mes if isinstance(p, TextPart))

    def parts(self) -> list[TextPart | ImagePart]:
        """The content as parts, whichever shape it is stored in: the parts of a multimodal
        ``mes``, or the text followed by the images SillyTavern attached in ``extra.media``
        (or the deprecated ``extra.image``)."""
        if not isinstance(self.mes, str):
            return list(self.mes)
        parts: list[TextPart | ImagePart] = []
        if self.mes:
            parts.append(TextPart(text=self.mes))
        if self.extra.media:
            parts.extend(
                ImagePart.from_url(item.url)
                for item in self.extra.media
                if item.url and item.type in (None, "image")
            )
        elif self.extra.image:
            parts.append(ImagePart.from_url(self.extra.image))
        return parts

    def to_st(self) -> Message:
        """This message as SillyTavern can read it: a multimodal ``mes`` becomes its text, and
        its images are appended to ``extra.media`` (``detail`` has no place there and is
        dropped). A plain message is returned as it is."""
        if isinstance(self.mes, str):
            return self
        out = self.model_copy(deep=True)
        out.mes = self.text
        images = [p for p in self.mes if isinstance(p, ImagePart)]
        if images:
            extra = out.extra
            extra.media = [
                *(extra.media or []),
                *(MediaItem(url=p.data_url, type="image") for p in images),
            ]
            out.extra = extra  # marks extra as set, so an implicit empty one is written too
        return out

    # --- dates ---

    @property
    def sent_at(self) -> datetime | None:
        """``send_date`` parsed (naive legacy formats read as UTC); ``None`` when unreadable."""
        return self.sent_at_in(UTC)

    def sent_at_in(self, tz: tzinfo) -> datetime | None:
        """``send_date`` parsed, reading naive legacy formats as local time in ``tz``."""

        return parse_send_date(self.send_date, tz=tz)

    # --- reasoning ---

    @property
    def current_reasoning(self) -> str:
        """The reasoning shown with the message: the active swipe's when it has one, else the
        message's own ``extra.reasoning``; ``""`` when neither exists."""
        info = self._swipe_info_at(self.swipe_id)
        if info is not None and info.extra is not None and info.extra.reasoning is not None:
            return info.extra.reasoning
        return self.extra.reasoning or ""

    @property
    def has_reasoning(self) -> bool:
        """Whether there is reasoning to show (the legacy zero-width placeholder is none)."""
        reasoning = self.current_reasoning
        return bool(reasoning) and reasoning != LEGACY_REASONING_PLACEHOLDER

    # --- swipes ---

    @property
    def active_swipe(self) -> Swipe | None:
        """The selected swipe, or ``None`` for a message without swipes."""
        if not self.swipes:
            return None
        index = self.swipe_id if self.swipe_id is not None else 0
        if not 0 <= index < len(self.swipes):
            return None
        return Swipe(index, self.swipes[index], self._swipe_info_at(index))

    def _swipe_info_at(self, index: int | None) -> SwipeInfo | None:
        if index is None or not self.swipe_info or not 0 <= index < len(self.swipe_info):
            return None
        return self.swipe_info[index]

    def ensure_swipes(self) -> None:
        """Give a message without swipes its first one (the current text and info), as
        SillyTavern does before the first swipe of a message."""
        if self.swipes:
            if self.swipe_id is None:
                self.swipe_id = 0
            return
        self.swipes = [self.text]
        self.swipe_id = 0
        self.swipe_info = [self._info_from_top_level()]

    def sync_to_swipe(self) -> None:
        """Copy ``mes`` and the top-level date fields and ``extra`` into the active swipe (after
        an edit of the message), so switching away and back keeps the edit."""
        if not self.swipes or self.swipe_id is None:
            return
        if not 0 <= self.swipe_id < len(self.swipes):
            return
        swipes = list(self.swipes)
        swipes[self.swipe_id] = self.text
        self.swipes = swipes
        infos = list(self.swipe_info or [])
        if self.swipe_id < len(infos):
            infos[self.swipe_id] = self._info_from_top_level(infos[self.swipe_id])
            self.swipe_info = infos

    def add_swipe(self, text: str, info: SwipeInfo | None = None, *, select: bool = True) -> int:
        """Append a swipe and return its index. With ``select`` (a new generation) it becomes
        the active one, its text and info copied to the top level; without it (the extra
        choices of an ``n > 1`` request) it only waits in the list."""
        self.ensure_swipes()
        self.sync_to_swipe()
        swipes = list(self.swipes or [])
        infos = list(self.swipe_info or [])
        # Older chats may have fewer infos than swipes; pad so indexes stay parallel.
        while len(infos) < len(swipes):
            infos.append(SwipeInfo())
        swipes.append(text)
        infos.append(info if info is not None else SwipeInfo(extra=MessageExtra()))
        self.swipes = swipes
        self.swipe_info = infos
        index = len(swipes) - 1
        if select:
            self._load_swipe(index)
        return index

    def select_swipe(self, index: int) -> None:
        """Make swipe ``index`` the active one: the current top level is saved into the swipe
        being left, then the chosen swipe's text goes to ``mes`` and its info to the top-level
        fields. As in SillyTavern, a swipe without stored ``extra`` keeps the current one."""
        if not self.swipes or not 0 <= index < len(self.swipes):
            count = len(self.swipes or [])
            raise IndexError(f"swipe {index} does not exist (the message has {count})")
        self.sync_to_swipe()
        self._load_swipe(index)

    def _load_swipe(self, index: int) -> None:
        swipes = self.swipes or []
        self.swipe_id = index
        self.mes = swipes[index]
        info = self._swipe_info_at(index)
        if info is None:
            return
        if info.send_date is not None:
            self.send_date = info.send_date
        for field in ("gen_started", "gen_finished"):
            value = getattr(info, field)
            if value is not None:
                setattr(self, field, value)
            elif field in self.model_fields_set:
                # The chosen swipe has no such time; another swipe's must not stand for it.
                setattr(self, field, None)
                self.model_fields_set.discard(field)
        if info.extra is not None:
            self.extra = info.extra.model_copy(deep=True)

    def _info_from_top_level(self, previous: SwipeInfo | None = None) -> SwipeInfo:
        info = previous.model_copy(deep=True) if previous is not None else SwipeInfo()
        if self.send_date is not None or "send_date" in info.model_fields_set:
            info.send_date = self.send_date
        if self.gen_started is not None or "gen_started" in info.model_fields_set:
            info.gen_started = self.gen_started
        if self.gen_finished is not None or "gen_finished" in info.model_fields_set:
            info.gen_finished = self.gen_finished
        info.extra = self.extra.model_copy(deep=True)
        return info


# --- chat metadata and header ----------------------------------------------------------------


class TimedEffect(WireModel):
    """The state of one sticky or cooldown world-info entry: the entry's hash and the chat
    length range in which the effect holds."""

    hash: Number | None = None
    start: Number | None = None
    end: Number | None = None
    protected: bool | None = None


class TimedWorldInfo(WireModel):
    """``chat_metadata.timedWorldInfo``: timed effects keyed ``"<world>.<uid>"``."""

    sticky: dict[str, TimedEffect] = Field(default_factory=dict)
    cooldown: dict[str, TimedEffect] = Field(default_factory=dict)


class ChatMetadata(WireModel):
    """``chat_metadata`` of the header: per-chat state that prompts and world info read.

    ``note_*`` is the Author's Note; ``scenario``, ``mes_example`` and ``system_prompt`` are
    per-chat overrides; ``variables`` are the chat-local macro variables. Extensions' keys
    (``cfg_*``, ``quickReply``...) are kept as extras.
    """

    integrity: str | None = None
    tainted: bool | None = None
    main_chat: str | None = None
    chat_id_hash: Number | None = None
    pick_reroll_seed: Number | None = None
    variables: dict[str, Any] | None = None
    timed_world_info: TimedWorldInfo | None = Field(default=None, alias="timedWorldInfo")
    world_info: str | None = None
    note_prompt: str | None = None
    note_interval: Number | None = None
    note_depth: Number | None = None
    note_position: Number | None = None
    note_role: Number | None = None
    scenario: str | None = None
    mes_example: str | None = None
    system_prompt: str | None = None
    persona: str | None = None
    last_in_context_message_id: int | None = Field(default=None, alias="lastInContextMessageId")
    script_injects: dict[str, Any] | None = None
    attachments: list[Any] | None = None
    #: tavernkit's per-chat response review setting (wins over the profile's)
    review: ReviewSettings | None = Field(default=None, alias="tavernkit_review")


class ChatHeader(WireModel):
    """The first line of a chat file. SillyTavern 1.18 writes ``"unused"`` for both names;
    older files carry the real names and a ``create_date``."""

    user_name: str | None = None
    character_name: str | None = None
    create_date: SendDate | None = None
    chat_metadata: ChatMetadata = Field(default_factory=ChatMetadata)

    @classmethod
    def new(cls, metadata: ChatMetadata | None = None) -> ChatHeader:
        """A header as SillyTavern 1.18 writes it for a new chat."""
        return cls.model_validate(
            {
                "chat_metadata": metadata if metadata is not None else ChatMetadata(),
                "user_name": "unused",
                "character_name": "unused",
            }
        )


class Chat(ValueModel):
    """A whole chat: the header line and the messages, oldest first."""

    header: ChatHeader = Field(default_factory=ChatHeader.new)
    messages: list[Message] = Field(default_factory=list)

    @property
    def metadata(self) -> ChatMetadata:
        return self.header.chat_metadata

    @property
    def variables(self) -> dict[str, Any]:
        """The chat-local variables, created on first use (as SillyTavern does)."""
        if self.metadata.variables is None:
            self.metadata.variables = {}
        return self.metadata.variables

    @property
    def timed_world_info(self) -> TimedWorldInfo:
        """The timed world-info state, created on first use."""
        if self.metadata.timed_world_info is None:
            self.metadata.timed_world_info = TimedWorldInfo.create()
        return self.metadata.timed_world_info
