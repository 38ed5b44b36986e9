"""Steps 3 and 5 of a chat turn: where the reply goes, and its final write.

Before the runner starts, the reply's place is stored empty and marked partial (a new
message, a new swipe of the last reply, or the shown swipe of the reply being continued), so a
crash leaves what was delivered. After the turn, the reply is finalized in one message write
(text, reasoning, model, dates, fallback notice); a turn that delivered nothing, or only
tool calls, leaves no empty reply behind. The tools the turn ran are stored as their own
system message before the reply (:mod:`.tool_messages`). A turn that failed after delivering
part of the reply keeps it marked partial, as a crash would, with the error's class and safe
code on the swipe (:mod:`.incomplete` reads them back); the tools of a failed turn are not
recorded (the partial reply keeps its place).

Kept apart from :mod:`.service` because it is the only part of a turn that writes the reply,
and it needs nothing of the service but the store, the owner and the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.chat.group_speaker import GroupSpeaker, mark_group_reply
from tavernkit.chat.incomplete import STOPPED_RECORD, TURN_ERROR_KEY, turn_error_record
from tavernkit.chat.prepare import PreparedTurn
from tavernkit.chat.regex_text import continued_prompt_text, state_regex_text
from tavernkit.chat.sink import Continued, StoreSink
from tavernkit.chat.swipe_writer import swipe_writer
from tavernkit.chat.tool_messages import tool_message, visible_invocations
from tavernkit.errors import Conflict
from tavernkit.generation.continuation import EchoStripper
from tavernkit.generation.result import TurnError, TurnResult
from tavernkit.models.chat import Message
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.prompt.reasoning import parse_reasoning
from tavernkit.store.protocol import Store
from tavernkit.tools.loop import InvocationRecord

__all__ = [
    "OpeningReply",
    "ReplyTarget",
    "ReplyWriter",
    "TurnOutcome",
    "record_turn_error",
    "reply_mode",
]


@dataclass(frozen=True)
class TurnOutcome:
    """What a turn left: the reply (or the impersonated / quiet text) and where it is stored.

    ``status`` is ``completed``, ``failed`` (``error`` says why, safely) or ``aborted``
    (stopped; the delivered text is kept). ``message_index`` / ``swipe_index`` are ``None``
    when nothing was stored (impersonation, a quiet prompt, a failure that delivered nothing).
    """

    kind: str
    status: str
    text: str
    reasoning: str = ""
    message_index: int | None = None
    message_id: str | None = None
    swipe_index: int | None = None
    model: str | None = None
    error: TurnError | None = None
    result: TurnResult | None = None


@dataclass
class ReplyTarget:
    """Where a reply streams to: a new message, a new swipe, or the end of a reply."""

    mode: str  # "message" | "swipe" | "continue" | "none"
    message_id: str | None = None
    position: int | None = None
    swipe_index: int | None = None
    previous_swipe: int | None = None
    message: Message | None = None
    prefix: str = ""
    reasoning_prefix: str = ""


def reply_mode(kind: str, loud: bool) -> str:
    """The :attr:`ReplyTarget.mode` :meth:`ReplyWriter.open` gives a turn of ``kind``."""
    if kind == "impersonate" or (kind == "quiet" and not loud):
        return "none"
    return kind if kind in ("swipe", "continue") else "message"


class OpeningReply:
    """A new reply's place being stored (:meth:`ReplyWriter.open` run as a task of its own,
    so the request goes out while the store writes: the write and the upstream's first byte
    overlap). The :class:`ReplyTarget` comes when :meth:`target` is awaited (the store sink's
    first write, the final write). The write runs to its end even when the turn is cancelled
    or stopped meanwhile (it holds the user's message): awaiting it is shielded."""

    mode = "message"

    def __init__(self, placing: Awaitable[ReplyTarget]) -> None:
        self.task: asyncio.Future[ReplyTarget] = asyncio.ensure_future(placing)

    async def target(self) -> ReplyTarget:
        return await asyncio.shield(self.task)

    async def place(self) -> tuple[str, int, Message]:
        """The stored place a store sink writes to: message id, swipe index, message."""
        target = await self.target()
        assert target.message_id is not None and target.message is not None
        return target.message_id, target.swipe_index or 0, target.message

    def failed(self) -> bool:
        """Whether the place could not be stored (its transaction, all or none, was not)."""
        task = self.task
        return task.done() and not task.cancelled() and task.exception() is not None

    def on_failure(self, callback: Callable[[BaseException], object]) -> None:
        """Call ``callback`` with the store's error if the place could not be stored."""

        def done(task: asyncio.Future[ReplyTarget]) -> None:
            error = None if task.cancelled() else task.exception()
            if error is not None:
                callback(error)

        self.task.add_done_callback(done)


class ReplyWriter:
    """Opens, finalizes and discards the reply's place in one chat store for one owner;
    ``now`` gives the timestamps written on messages and swipes."""

    def __init__(self, store: Store, owner: str, now: Callable[[], str]) -> None:
        self.store = store
        self.owner = owner
        self.now = now

    def reply_message(self, char_name: str, api: str, model: str | None) -> Message:
        now = self.now()
        message = Message.new(char_name, "", is_user=False, send_date=now)
        message.extra.api = api
        message.extra.model = model
        message.gen_started = now
        message.ensure_swipes()
        return message

    async def open(
        self,
        chat_id: str,
        kind: str,
        prepared: PreparedTurn,
        loud: bool,
        *,
        speaker: GroupSpeaker | None = None,
        before: Message | None = None,
    ) -> ReplyTarget:
        """Store the reply's place, empty and partial (nothing for impersonation or a quiet
        prompt that stays quiet). ``speaker``: the group member whose reply it is (its
        ``original_avatar`` and batch id go on the message). ``before``: the user's message
        of the turn, not stored yet: it goes first, in the same transaction as a new reply."""
        if before is not None and kind != "normal":  # only a new reply takes it along
            await self.store.append_message(chat_id, before, owner=self.owner)
            before = None
        if kind == "impersonate" or (kind == "quiet" and not loud):
            return ReplyTarget("none")
        if kind in ("swipe", "continue"):
            return await self._open_last(chat_id, kind, prepared)
        message = self.reply_message(
            prepared.char_name, prepared.main_api, prepared.connection.model
        )
        if speaker is not None:
            mark_group_reply(message, speaker)
        # stored marked partial with the user's message, in one transaction: all or none
        *_, stored = await self.store.append_messages(
            chat_id,
            [*([before] if before is not None else []), message],
            owner=self.owner,
            last_partial=(0,),
            detached=True,  # OpeningReply shields it: it runs to its end whatever happens
        )
        return ReplyTarget("message", stored.id, stored.position, 0, None, message)

    async def _open_last(self, chat_id: str, kind: str, prepared: PreparedTurn) -> ReplyTarget:
        # the last message only: a swipe or continue costs the same whatever the chat's length
        window = await self.store.load_chat_window(chat_id, last=1, owner=self.owner)
        if not window.tail or window.tail[-1].data.get("is_user"):
            raise Conflict(f"there is no reply to {'swipe' if kind == 'swipe' else 'continue'}")
        entry = window.tail[-1]
        message = Message.model_validate(entry.data)
        if kind == "continue":
            message.ensure_swipes()
            index = message.swipe_id or 0
            if not entry.data.get("swipes"):
                await self.store.update_message(entry.id, message, owner=self.owner)
            await self.store.update_swipe_text(
                entry.id, index, message.text, complete=False, owner=self.owner
            )
            return ReplyTarget(
                "continue",
                entry.id,
                entry.position,
                index,
                index,
                message,
                prefix=message.text,
                reasoning_prefix=message.extra.reasoning or "",
            )
        previous = message.swipe_id or 0
        now = self.now()
        extra = {"api": prepared.main_api, "model": prepared.connection.model}
        info = {"send_date": now, "gen_started": now, "extra": extra}
        index = await self.store.append_swipe(
            entry.id, "", info=info, activate=True, complete=False, owner=self.owner
        )
        fresh = Message.model_validate(
            (await self.store.get_message(entry.id, owner=self.owner)).data
        )
        return ReplyTarget("swipe", entry.id, entry.position, index, previous, fresh)

    def sink(self, target: ReplyTarget | OpeningReply, min_interval: float) -> StoreSink | None:
        """The sink that fills the reply's place as it streams (none when nothing is stored).
        A place still being stored (an :class:`OpeningReply`) is waited for by the sink's
        first write, not before: a piece is taken in place meanwhile."""
        if target.mode == "none":
            return None
        if isinstance(target, OpeningReply):
            return StoreSink(
                self.store,
                "",
                0,
                Message(),
                owner=self.owner,
                min_interval=min_interval,
                writer=swipe_writer(self.store),
                place=target.place,
            )
        assert target.message_id is not None and target.message is not None
        return StoreSink(
            self.store,
            target.message_id,
            target.swipe_index or 0,
            target.message,
            owner=self.owner,
            continued=Continued(target.prefix, target.reasoning_prefix),
            min_interval=min_interval,
            writer=swipe_writer(self.store),
        )

    async def finish(
        self,
        chat_id: str,
        kind: str,
        prepared: PreparedTurn,
        target: ReplyTarget,
        result: TurnResult,
    ) -> TurnOutcome:
        """Stage *finish*: the reply's one final write, and what the turn left."""
        text, reasoning, prefix = _kept_text(kind, prepared, target, result)
        model = result.model or prepared.connection.model
        outcome: dict[str, Any] = {
            "kind": kind,
            "status": result.status,
            "text": text,
            "reasoning": reasoning,
            "model": model,
            "error": result.error,
            "result": result,
        }
        if target.mode == "none" or target.message is None or target.message_id is None:
            return TurnOutcome(**outcome)
        if not text and (result.status != "completed" or result.tool_invocations):
            # nothing to show (a failure, or a reply that was only tool calls): no reply, and
            # no tool message that would end the chat where a reply belongs (SillyTavern
            # saves nothing either when it stops for a stealth tool)
            await self.discard(chat_id, target)
            return TurnOutcome(**outcome)
        tools = visible_invocations(result.tool_invocations)
        message = target.message.model_copy(deep=True)
        if target.mode == "continue":
            text = _rejoin(prefix, text, result, postfix=continue_postfix(prepared))
            message.mes = prefix + text
            if reasoning:
                message.extra.reasoning = target.reasoning_prefix + reasoning
        else:
            message.mes = text
            message.extra.reasoning = reasoning
            message.extra.reasoning_duration = None
            message.extra.model = model
        unfinished = self._mark_ending(message, result)
        message_id, position = target.message_id, target.position
        if tools and not unfinished:
            message_id, position = await self._store_before_reply(
                chat_id, target.message_id, message, self._tool_message(tools, prepared, model)
            )
        else:
            # A failed or stopped turn's reply stays partial, as a crash leaves it (one write,
            # so it is never seen complete in between).
            partial = (target.swipe_index or 0,) if unfinished else ()
            await self.store.update_message(
                target.message_id, message, partial=partial, owner=self.owner
            )
        outcome["text"] = message.text
        return TurnOutcome(
            **outcome,
            message_index=position,
            message_id=message_id,
            swipe_index=target.swipe_index,
        )

    def _mark_ending(self, message: Message, result: TurnResult) -> bool:
        """How the reply ended, on the message (finished date, notice, error or stop record);
        whether it is unfinished (failed or stopped)."""
        failed = result.status == "failed"
        # a stopped reply is kept as shown, but stays marked unfinished so a resumed chat says
        # so (and /continue can finish it)
        unfinished = failed or result.status == "aborted"
        if not failed:
            message.gen_finished = self.now()  # a failed reply never finished, as after a crash
        if result.notice is not None:
            _store_notice(message, result)
        if failed:
            record_turn_error(message, result.error)
        elif unfinished:
            _set_extension(message, TURN_ERROR_KEY, dict(STOPPED_RECORD))
        else:
            record_turn_error(message, None)
        message.sync_to_swipe()
        return unfinished

    def _tool_message(
        self, tools: Sequence[InvocationRecord], prepared: PreparedTurn, model: str | None
    ) -> Message:
        return tool_message(tools, api=prepared.main_api, model=model, send_date=self.now())

    async def _store_before_reply(
        self, chat_id: str, place_id: str, reply: Message, tools: Message
    ) -> tuple[str, int]:
        """The tool message where the reply's place is, the reply right after it (see
        :mod:`.tool_messages`); the reply's new id and position. The reply is written first:
        a crash between the two writes leaves it twice (the partial place and the whole
        copy), never lost."""
        stored = await self.store.append_message(chat_id, reply, owner=self.owner)
        await self.store.update_message(place_id, tools, owner=self.owner)
        return stored.id, stored.position

    async def discard(self, chat_id: str, target: ReplyTarget) -> None:
        """A turn that delivered nothing leaves no empty reply behind."""
        assert target.message_id is not None
        if target.mode == "message" and target.position is not None:
            await self.store.truncate_chat(chat_id, target.position, owner=self.owner)
        elif target.mode == "swipe" and target.swipe_index is not None:
            await self.store.delete_swipe(target.message_id, target.swipe_index, owner=self.owner)
            if target.previous_swipe is not None:
                await self.store.set_active_swipe(
                    target.message_id, target.previous_swipe, owner=self.owner
                )
        elif target.mode == "continue" and target.message is not None:
            await self.store.update_swipe_text(
                target.message_id,
                target.swipe_index or 0,
                target.prefix,
                complete=True,
                owner=self.owner,
            )


#: SillyTavern's default ``continue_postfix`` (a space)
_DEFAULT_POSTFIX: str = ChatCompletionPreset.model_fields["continue_postfix"].default


def continue_postfix(prepared: PreparedTurn) -> str:
    """What SillyTavern puts between a continued message and its continuation: the chat
    preset's ``continue_postfix`` (a space by default) on a chat-completion API, nothing on a
    text-completion one (its prompt ends with the message itself)."""
    if prepared.main_api != "openai":
        return ""
    preset = prepared.state.chat_preset
    return preset.continue_postfix if preset is not None else _DEFAULT_POSTFIX


def _kept_text(
    kind: str, prepared: PreparedTurn, target: ReplyTarget, result: TurnResult
) -> tuple[str, str, str]:
    """The reply's text and reasoning as they are kept, and the continued text they follow:
    a reasoning block the live split missed parsed out, the plain regex scripts run."""
    text, reasoning = result.text, result.reasoning
    settings = prepared.state.settings.reasoning
    # with auto-parse on the stream was split live (chat/plan.py); this parse catches a
    # block the live split did not see at the very start (the strict parse allows
    # leading whitespace before the prefix)
    if not reasoning and settings.auto_parse and prepared.state.reasoning is not None:
        parsed = parse_reasoning(text, prepared.state.reasoning, strict=True)
        if parsed is not None and parsed.reasoning:
            text, reasoning = parsed.content, parsed.reasoning
    prefix = target.prefix
    scripts = state_regex_text(
        prepared.state,
        main_api=prepared.main_api,
        compat=prepared.compat,
        variables=prepared.variables,
    )
    if scripts is not None:
        # the plain regex scripts on what is kept: the reply (an impersonation as the
        # user's input) and its reasoning (SillyTavern's cleanUpMessage, reasoning parse)
        text = scripts.impersonation(text) if kind == "impersonate" else scripts.reply(text)
        reasoning = scripts.reasoning(reasoning) if reasoning else reasoning
        if target.mode == "continue" and prepared.compat == "st-1.18":
            continued = continued_prompt_text(
                prepared.state,
                main_api=prepared.main_api,
                compat=prepared.compat,
                variables=prepared.variables,
            )
            prefix = continued if continued is not None else prefix
    return text, reasoning, prefix


def _rejoin(prefix: str, text: str, result: TurnResult, *, postfix: str = "") -> str:
    """A continuation as it joins the continued message. The runner drops the leading spaces
    of a text model's reply (noise for a fresh reply), but after a continued message the space
    the model put first is the word break between the old text and the new. Where neither side
    has one, ``postfix`` goes between, as SillyTavern does when the message does not end with a
    space (its "coping mechanism for OAI spacing"); unlike SillyTavern, never a second space
    after one the model wrote."""
    joined = _model_join(prefix, text, result)
    if postfix and joined and prefix and not prefix[-1:].isspace() and not joined[:1].isspace():
        return postfix + joined
    return joined


def _model_join(prefix: str, text: str, result: TurnResult) -> str:
    completion = result.completion
    if not prefix or not text or prefix[-1:].isspace() or text[:1].isspace():
        return text
    if completion is None or result.counters.continuations:
        return text  # stitched from several attempts: the runner already joined them
    raw = _without_echo(completion.text, prefix)
    body = raw.lstrip(" \t")
    return raw[: len(raw) - len(body)] + text if body.startswith(text[:1]) else text


def _without_echo(text: str, echoed: str) -> str:
    """``text`` less a leading copy of ``echoed``, by the stream's own matcher."""
    stripper = EchoStripper(echoed)
    return stripper.feed(text) + stripper.finish()


def record_turn_error(message: Message, error: TurnError | None) -> None:
    """Record why the reply is unfinished (class and safe code only), or (``None``) clear an
    earlier failure's record: a turn completed the reply, or the user edited it."""
    _set_extension(message, TURN_ERROR_KEY, None if error is None else turn_error_record(error))


def _store_notice(message: Message, result: TurnResult) -> None:
    """Keep the fallback notice with the reply (our addition, so under ``extensions``): which
    model answered and which attempts failed, by error class and safe code only."""
    assert result.notice is not None
    notice = {**result.notice.to_json(), "text": result.notice.text()}
    _set_extension(message, "fallback_notice", notice)


def _set_extension(message: Message, key: str, value: Any) -> None:
    """Set (``None``: remove) one of our keys under the message's ``extra.extensions``."""
    extra = message.extra.to_wire()
    extensions = dict(extra.get("extensions") or {})
    if value is None:
        if key not in extensions:
            return
        del extensions[key]
    else:
        extensions[key] = value
    message.extra = type(message.extra).model_validate({**extra, "extensions": extensions})
