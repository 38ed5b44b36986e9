"""The world-info scan of one generation, fed the way SillyTavern's ``Generate`` feeds it.

``Generate`` builds the scan texts from the chat (hidden messages dropped, the first message
macro-substituted, ``"Name: text"`` when names are included, newest first), hands the card and
persona texts over as ``global_scan_data``, and scans with the max *prompt* tokens (context
minus response) as the budget basis. The store-backed pipeline and the replay of recorded
generations both go through here, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Required, TypedDict, Unpack, overload

from tavernkit.models.chat import Message
from tavernkit.models.chat_window import MessageWindow, OutsideWindow
from tavernkit.prompt.card import CardFields, card_fields
from tavernkit.prompt.regex import prompt_regex
from tavernkit.prompt.state import PromptState, Substitute
from tavernkit.text.regex_scripts import RegexPlacement
from tavernkit.worldinfo.result import WorldInfoResult
from tavernkit.worldinfo.scan import scan as wi_scan
from tavernkit.worldinfo.tokens import estimate_tokens

__all__ = ["PromptScanOptions", "prompt_budget", "scan_texts", "scan_world_info"]


def scan_texts(state: PromptState, substitute: Substitute, *, include_names: bool) -> Sequence[str]:
    """The chat as world info scans it: newest first (the first visible message substituted).

    The scan wants every message's place (timed effects count them) but reads only the newest
    few hundred, so over a :class:`~tavernkit.models.chat_window.MessageWindow` the messages the
    turn did not load are counted, and reading one raises
    :class:`~tavernkit.models.chat_window.OutsideWindow`. Over a plain list this is one
    comprehension (as cheap as Python allows) and the first visible message is redone with its
    macros afterwards.
    """
    messages = state.messages
    if isinstance(messages, MessageWindow) and not messages.complete:
        head = _texts(messages.head, include_names)
        tail = _texts(messages.tail, include_names)
        if not head:  # the store's flags and the model disagree: read the whole chat
            raise OutsideWindow(len(messages.head))
        first = next(m for m in messages.head if not m.is_system)
        head[0] = _first_text(first, substitute, include_names)
        head.reverse()
        tail.reverse()
        gap = messages.gap
        return _NewestTexts(tail, gap.total - gap.hidden, head)
    out = _texts(messages, include_names)
    if not out:
        return out
    first = next(m for m in messages if not m.is_system)
    out[0] = _first_text(first, substitute, include_names)
    out.reverse()
    return out


def _texts(messages: Iterable[Message], include_names: bool) -> list[str]:
    if include_names:
        return [
            f"{m.name}: {m.mes}" if m.mes.__class__ is str else f"{m.name}: {m.text}"
            for m in messages
            if not m.is_system
        ]
    return [m.mes if m.mes.__class__ is str else m.text for m in messages if not m.is_system]


def _first_text(first: Message, substitute: Substitute, include_names: bool) -> str:
    text = substitute(first.mes if isinstance(first.mes, str) else first.text)
    return f"{first.name}: {text}" if include_names else text


class _NewestTexts(Sequence[str]):
    """Scan texts newest first: the tail's, ``skipped`` not loaded, then the head's."""

    __slots__ = ("_head", "_skipped", "_tail")

    def __init__(self, tail: list[str], skipped: int, head: list[str]) -> None:
        self._tail = tail
        self._skipped = skipped
        self._head = head

    def __len__(self) -> int:
        return len(self._tail) + self._skipped + len(self._head)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1 and stop <= len(self._tail):
                return self._tail[start:stop]
            return [self[i] for i in range(start, stop, step)]
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("scan text index out of range")
        if i < len(self._tail):
            return self._tail[i]
        i -= len(self._tail) + self._skipped
        if i < 0:
            raise OutsideWindow(i)
        return self._head[i]


def prompt_budget(state: PromptState, *, is_chat: bool) -> int:
    """Max prompt tokens: the context minus the response (the preset's for chat completion)."""
    if is_chat and state.preset is not None:
        context = state.max_context if state.max_context is not None else None
        response = state.max_response if state.max_response is not None else None
        return (context if context is not None else state.preset.openai_max_context) - (
            response if response is not None else state.preset.openai_max_tokens
        )
    context = state.max_context if state.max_context is not None else state.settings.max_context
    response = state.max_response if state.max_response is not None else state.settings.amount_gen
    return context - response


class PromptScanOptions(TypedDict, total=False):
    """:func:`scan_world_info`'s keyword options: ``kind`` the generation type (the scan's
    trigger); ``is_chat`` (required) a chat-completion build, whose budget is the preset's;
    ``scan`` in place of :func:`tavernkit.worldinfo.scan` (a benchmark's or a test's); the
    rest as the function's docstring and that scan's keywords of the same names say."""

    kind: str
    is_chat: Required[bool]
    count_tokens: Callable[[str], int] | None
    character_filename: str | None
    rng: Callable[[], float] | None
    compat: str
    dry_run: bool
    scan: Callable[..., Any] | None
    card: CardFields | None
    texts: Sequence[str] | None
    force_activate: Iterable[str]


def scan_world_info(
    state: PromptState,
    books: Iterable[Any],
    settings: Any,
    substitute: Substitute,
    **options: Unpack[PromptScanOptions],
) -> WorldInfoResult:
    """Scan ``books`` (``(name, data, scope)`` tuples or ``worldinfo.Book`` values) for the
    chat of ``state``. ``settings`` is anything ``ScanSettings.coerce`` reads (SillyTavern's
    ``world_info_*`` mapping, our ``WorldInfoSettings`` model...). ``rng`` feeds probability and
    group rolls (a fresh unseeded generator by default). ``card`` is the build's evaluated card
    fields: pass the ones the prompt will use, so a card's macros run once per generation.
    ``texts`` replaces the chat as scanned (newest first, :func:`scan_texts`'s shape: a task's
    own messages); ``count_tokens`` defaults to the scan's estimate. A character's extra books
    (scope ``character_extra``) scan as character books, as in SillyTavern.
    ``force_activate``: ``"world.uid"`` keys activated as if a key matched (vectorized
    entries). The options: :class:`PromptScanOptions`."""
    unknown = sorted(set(options) - set(PromptScanOptions.__annotations__))
    if unknown:
        raise TypeError(f"scan_world_info() got an unexpected keyword argument {unknown[0]!r}")
    if "is_chat" not in options:
        raise TypeError("scan_world_info() missing 1 required keyword-only argument: 'is_chat'")
    o = options
    kind, card, texts = o.get("kind", "normal"), o.get("card"), o.get("texts")
    count_tokens, force_activate = o.get("count_tokens"), o.get("force_activate", ())
    scan = o.get("scan")
    if scan is None:
        scan = wi_scan
    # only when there are any: a caller's own scan function may not take the argument
    forced: dict[str, Any] = {"force_activate": force_activate} if force_activate else {}
    regex = prompt_regex(state, substitute)
    if regex is not None and regex.scripts.may_change(RegexPlacement.WORLD_INFO, prompt=True):
        forced["content_filter"] = regex.world_info
    fields = card if card is not None else card_fields(state, substitute)
    include_names = _include_names(settings)
    metadata = state.chat_metadata
    timed = metadata.timed_world_info.to_wire() if metadata and metadata.timed_world_info else None
    if texts is None:
        texts = scan_texts(state, substitute, include_names=include_names)
    result: WorldInfoResult = scan(
        [_scoped(b) for b in books],
        texts,
        max_context=prompt_budget(state, is_chat=o["is_chat"]),
        settings=settings,
        global_scan_data={
            "personaDescription": fields.persona,
            "characterDescription": fields.description,
            "characterPersonality": fields.personality,
            "characterDepthPrompt": fields.depth_prompt,
            "scenario": fields.scenario,
            "creatorNotes": fields.creator_notes,
            "trigger": kind,
        },
        trigger=kind,
        character_filename=o.get("character_filename"),
        timed_state=timed,
        substitute=substitute,
        rng=o.get("rng"),  # None: the scan's own unseeded generator
        dry_run=o.get("dry_run", False),
        compat=o.get("compat", "default"),
        count_tokens=count_tokens if count_tokens is not None else estimate_tokens,
        **forced,
    )
    return result


def _scoped(book: Any) -> Any:
    """``book`` with a character's extra book (``character_extra``) as a character book."""
    if isinstance(book, tuple) and len(book) > 2 and book[2] == "character_extra":
        return (book[0], book[1], "character", *book[3:])
    return book


def _include_names(settings: Any) -> bool:
    if isinstance(settings, Mapping):
        if "world_info_include_names" in settings:
            return bool(settings["world_info_include_names"])
        return bool(settings.get("include_names", True))
    return bool(getattr(settings, "include_names", True))
