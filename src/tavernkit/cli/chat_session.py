"""One ``tavernkit chat`` session: input lines and slash commands, each one
:class:`~tavernkit.chat.service.ChatService` (or library) call.

Bad arguments answer a usage line on stderr and change nothing (:mod:`.slash`). Commands that
delete or overwrite text (``/edit``, ``/delete``, ``/regen``) snapshot the chat first, so
``/undo`` puts it back (:mod:`tavernkit.chat.undo`). Ctrl-C while a reply streams stops it
(the text shown is kept, marked stopped); at the prompt it ends the session. So does ``/stop``
typed while the reply streams (unechoed: what is typed then never lands inside the reply; any
other line typed then runs at the next prompt).

The commands that show or change stored messages without a turn are
:mod:`.chat_message_commands`'; those that change the chat's setup :mod:`.chat_setting_commands`'.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from rich.markup import escape

from tavernkit.chat.group_turn import GroupTurnOutcome
from tavernkit.chat.quick_replies import QuickReplies, quick_reply_lines
from tavernkit.chat.service import TurnOutcome
from tavernkit.chat.undo import UndoStack
from tavernkit.chat.writer import card_writer
from tavernkit.cli.chat_display import (
    ChatConsoleSink,
    JsonSink,
    out,
    print_message,
    print_shown,
    report_outcome,
    say_error,
    swipe_counter,
)
from tavernkit.cli.chat_message_commands import MessageCommands
from tavernkit.cli.chat_setting_commands import SettingCommands
from tavernkit.cli.failures import Where, where_for
from tavernkit.cli.group_session import run_group_turn
from tavernkit.cli.language import say
from tavernkit.cli.line_input import LineReader
from tavernkit.cli.script_questions import ask_on_terminal
from tavernkit.cli.slash import (
    COMMANDS,
    UsageError,
    help_text,
    no_argument,
    positive_number,
    split_command,
)
from tavernkit.errors import NotFound, TavernKitError
from tavernkit.facade import Tavern
from tavernkit.models.character import Card
from tavernkit.models.chat import Message
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.quick_reply import QuickReply
from tavernkit.quick_reply_bindings import QuickReplyBindings
from tavernkit.stscript import Answer, Question

__all__ = ["Session"]

_TOAST_STYLES = {"info": "blue", "success": "green", "warning": "yellow", "error": "red"}


class Session(SettingCommands, MessageCommands):
    """One interactive (or ``--once``) chat in a terminal."""

    def __init__(
        self,
        tk: Tavern,
        chat_id: str,
        *,
        as_json: bool,
        overrides: dict[str, Any],
        group: str | None = None,
    ):
        self.tk = tk
        self.chats = tk.chats
        self.chat_id = chat_id
        #: the group whose chat this is (``--group``): turns go through the group
        self.group = group
        self.as_json = as_json
        self.overrides = overrides
        self.prefill: str | None = None
        self.last_reasoning = ""
        self.undo_stack = UndoStack()
        self._suggestion = ""
        self._generating = False
        self._sigint_installed = False
        self._qr_depth = 0
        #: set by Ctrl-C at the prompt: the session ends
        self.interrupted = asyncio.Event()
        #: the terminal's input lines (its thread is this session's)
        self.input = LineReader()
        #: interactive: lines typed while a reply streams are read (``/stop`` stops it)
        self.watch_typing = False
        #: interactive: a script's /input, /popup, /buttons ask on the terminal (otherwise
        #: they answer as no one pressing anything: :mod:`tavernkit.stscript.commands.questions`)
        self.can_ask = False

    # -- Ctrl-C ------------------------------------------------------------------------------

    def on_sigint(self) -> None:
        if self._generating:
            self.chats.stop(self.chat_id)
        else:
            self.interrupted.set()

    @contextlib.contextmanager
    def while_generating(self) -> Iterator[None]:
        """Ctrl-C and a typed ``/stop`` stop the reply while the block runs."""
        typing: contextlib.AbstractContextManager[None] = (
            self.input.typed_during(lambda: self.chats.stop(self.chat_id))
            if self.watch_typing
            else contextlib.nullcontext()
        )
        with self.sigint_handler(), typing:
            yield

    @contextlib.contextmanager
    def sigint_handler(self) -> Iterator[None]:
        """Ctrl-C goes to :meth:`on_sigint` while the block runs (where signals can be set)."""
        if self._sigint_installed:  # nested (a turn inside the interactive loop)
            yield
            return
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, self.on_sigint)
            self._sigint_installed = True
        try:
            yield
        finally:
            if self._sigint_installed:
                loop.remove_signal_handler(signal.SIGINT)
                self._sigint_installed = False
        self._qr_depth = 0

    # -- turns -------------------------------------------------------------------------------

    async def run_turn(
        self, verb: Callable[..., Awaitable[TurnOutcome]], *args: Any
    ) -> TurnOutcome:
        # A mistyped --profile or --persona fails here, before the message is stored.
        await self.chats.check_overrides(self.overrides or None)
        sink: ChatConsoleSink | JsonSink
        if self.as_json:
            sink = JsonSink(out)
        else:
            # The wait before the first token can be long (the embedded model loads then).
            name = await self._speaker(verb)
            status = out.status(say("waiting for the model…"), spinner="dots")
            status.start()
            sink = ChatConsoleSink(out, status, name)
        kwargs: dict[str, Any] = {"sink": sink, "overrides": self.overrides or None}
        if verb in (self.chats.send, self.chats.swipe, self.chats.regenerate) and self.prefill:
            kwargs["prefill"], self.prefill = self.prefill, None
        self._generating = True
        try:
            with self.while_generating():
                outcome = await verb(self.chat_id, *args, **kwargs)
        finally:
            self._generating = False
            if isinstance(sink, ChatConsoleSink):
                sink.stop_status(header=False)
        if outcome.reasoning:
            self.last_reasoning = outcome.reasoning
        if isinstance(sink, JsonSink):
            sink.line(
                {
                    "event": "done",
                    "kind": outcome.kind,
                    "status": outcome.status,
                    "chat_id": self.chat_id,
                    "message_index": outcome.message_index,
                    "swipe_index": outcome.swipe_index,
                    "model": outcome.model,
                    "text": outcome.text,
                    "reasoning": outcome.reasoning,
                }
            )
        where = await self._where(outcome) if outcome.status == "failed" else Where()
        console_sink = sink if isinstance(sink, ChatConsoleSink) else None
        report_outcome(outcome, console_sink, where)
        if console_sink is not None and outcome.message_id is not None:
            stored = await self.tk.store.get_message(outcome.message_id, owner=self.tk.owner)
            counter = swipe_counter(Message.model_validate(stored.data))
            out.print(f"  [dim]#{outcome.message_index} {counter}[/]")
            shown = (await self.chats.shown(self.chat_id, [stored])).get(stored.position)
            final = shown.text if shown is not None else None
            raw = outcome.result.text if outcome.result is not None else outcome.text
            if final is None and outcome.kind != "continue" and outcome.text != raw:
                final = outcome.text  # regex scripts changed the text before it was stored
            if final is not None:
                # what the chat shows now: the stream showed the reply as it came
                print_shown(final)
        return outcome

    async def _writer_profile(self) -> str | None:
        """The profile the chat's character writes with (chat/writer.py), if it names one."""
        info = await self.tk.store.get_chat_info(self.chat_id, owner=self.tk.owner)
        if info.character_id is None:
            return None
        card: Any = None
        with contextlib.suppress(NotFound):
            card = await self.tk.store.get("character", info.character_id, owner=self.tk.owner)
        return card_writer(card if isinstance(card, Card) else None).profile

    async def _where(self, outcome: TurnOutcome) -> Where:
        """What is safe to say about the connection a failed turn used."""
        ref = (
            self.overrides.get("profile")
            or await self._writer_profile()
            or (await self.tk.settings()).selections.profile
        )
        profile: Any = None
        if ref:
            with contextlib.suppress(NotFound):
                profile = await self.tk.store.get("connection_profile", ref, owner=self.tk.owner)
        attempts = outcome.result.attempts if outcome.result is not None else []
        key_id = next((a.key_id for a in reversed(attempts) if a.key_id), None)
        return await where_for(
            self.tk.store,
            profile if isinstance(profile, ConnectionProfile) else None,
            key_id,
            owner=self.tk.owner,
        )

    async def _speaker(self, verb: Callable[..., Awaitable[TurnOutcome]]) -> str:
        if verb == self.chats.impersonate:
            return "(you)"
        # The chat's listing line (one row), not the chat: this runs before every turn.
        info = await self.tk.store.get_chat_info(self.chat_id, owner=self.tk.owner)
        return info.character_name or "Character"

    # -- dispatch ----------------------------------------------------------------------------

    async def command(self, line: str) -> bool:
        """Run one input line; ``False`` ends the session."""
        if not line.startswith("/"):
            try:
                if self.group is not None:
                    await self.group_turn("normal", text=line)
                else:
                    await self.run_turn(self.chats.send, line)
            except TavernKitError as exc:
                say_error(say("error: {line}", line=exc))
            return True
        name, rest = split_command(line)
        command = COMMANDS.get(name)
        if command is None:
            # not one of ours: SillyTavern's STscript (``/echo hi | /gen …``)
            try:
                await self.run_script(line)
            except TavernKitError as exc:
                say_error(say("error: {line}", line=exc))
            return True
        if command.name == "quit":
            return False
        handler = getattr(self, f"cmd_{command.name}")
        try:
            await handler(rest)
        except UsageError as exc:
            say_error(
                say("usage: {usage}  ({problem})", usage=exc.command.usage, problem=exc.problem)
            )
        except TavernKitError as exc:
            say_error(say("error: {line}", line=exc))
        return True

    async def run_script(self, line: str) -> None:
        """Run ``line`` as an STscript on this chat; show its toasts, the messages it added,
        its error (with SillyTavern's position hint) and its result."""
        before = await self._count()
        self._generating = True
        try:
            with self.sigint_handler():
                outcome = await self.tk.run_script(
                    self.chat_id,
                    line,
                    input_text=self._suggestion,
                    asker=self._ask if self.can_ask else None,
                )
        finally:
            self._generating = False
        self._suggestion = outcome.input_text
        if self.as_json:
            JsonSink(out).line({"event": "script", "chat_id": self.chat_id, **outcome.to_json()})
            return
        for toast in outcome.toasts:
            style = _TOAST_STYLES.get(toast.type, "blue")
            title = f"{escape(toast.title)}: " if toast.title else ""
            out.print(f"[{style}]{title}{escape(toast.message)}[/]")
        for text in outcome.shown:
            out.print(text, markup=False, highlight=False, soft_wrap=True)
        after = await self._count()
        if after > before:
            window = await self.tk.store.load_chat_window(
                self.chat_id, last=after - before, owner=self.tk.owner
            )
            for entry in window.tail:
                print_message(entry.position, Message.model_validate(entry.data))
        if outcome.error is not None:
            error = outcome.error
            say_error(f"{error.name}: {error.message}\n{error.hint}")
        elif outcome.aborted:
            out.print(f"[dim]{say('script aborted')}{': ' + escape(outcome.abort_reason or '')}[/]")
        elif outcome.pipe:
            out.print(f"[dim]→[/] {escape(outcome.pipe)}")

    async def _ask(self, question: Question) -> Answer:
        """A script's question, asked on the terminal; Ctrl-C meanwhile is its Cancel."""
        generating, self._generating = self._generating, False

        async def read(prompt: str) -> str | None:
            return await self.input.read(prompt, self.interrupted)

        try:
            return await ask_on_terminal(question, read)
        finally:
            if self.interrupted.is_set():  # the Ctrl-C cancelled the question, not the session
                out.print()
                self.interrupted.clear()
            self._generating = generating

    async def group_turn(
        self, kind: str, *, text: str = "", member: str | None = None
    ) -> GroupTurnOutcome:
        self._generating = True
        try:
            with self.while_generating():
                return await run_group_turn(
                    self.chats,
                    self.chat_id,
                    kind,
                    as_json=self.as_json,
                    overrides=self.overrides,
                    text=text,
                    member=member,
                )
        finally:
            self._generating = False

    # -- commands ----------------------------------------------------------------------------

    async def cmd_help(self, arg: str) -> None:
        no_argument(COMMANDS["help"], arg)
        out.print(help_text(), markup=False, soft_wrap=True)

    async def cmd_trigger(self, arg: str) -> None:
        command = COMMANDS["trigger"]
        if self.group is None:
            raise command.error("this is not a group chat (start one with --group NAME)")
        if not arg.strip():
            raise command.error("name the member who should reply")
        await self.group_turn("normal", member=arg.strip())

    async def cmd_swipe(self, arg: str) -> None:
        command = COMMANDS["swipe"]
        if not arg and self.group is not None:
            await self.group_turn("swipe")
            return
        if not arg:
            await self.run_turn(self.chats.swipe)
            return
        stored = await self.chats.load(self.chat_id)
        if not stored.messages:
            raise command.error("the chat is empty")
        current = Message.model_validate(stored.messages[-1].data)
        count = len(current.swipes or [])
        if arg == "back":
            if (current.swipe_id or 0) == 0:
                raise command.error("this is the first swipe")
            index = (current.swipe_id or 0) - 1
        else:
            number = positive_number(command, arg, "the swipe number")
            if number > count:
                raise command.error(f"no swipe {number}; the last reply has {count}")
            index = number - 1
        message = await self.chats.select_swipe(self.chat_id, index)
        print_message(len(stored.messages) - 1, message)

    async def cmd_regen(self, arg: str) -> None:
        no_argument(COMMANDS["regen"], arg)
        await self._snapshot("regen")
        try:
            if self.group is not None:
                await self.group_turn("regenerate")
            else:
                await self.run_turn(self.chats.regenerate)
        except TavernKitError:
            self.undo_stack.discard_last()
            raise

    async def cmd_continue(self, arg: str) -> None:
        no_argument(COMMANDS["continue"], arg)
        if self.group is not None:
            await self.group_turn("continue")
            return
        await self.run_turn(self.chats.continue_)

    async def cmd_impersonate(self, arg: str) -> None:
        no_argument(COMMANDS["impersonate"], arg)
        outcome: TurnOutcome | GroupTurnOutcome
        if self.group is not None:
            outcome = await self.group_turn("impersonate")
        else:
            outcome = await self.run_turn(self.chats.impersonate)
        if outcome.text and not self.as_json:
            out.print(f"[dim]{say('(send it with /send, or type your own)')}[/]")
        self._suggestion = outcome.text

    async def cmd_send(self, arg: str) -> None:
        no_argument(COMMANDS["send"], arg)
        text = self._suggestion
        if not text:
            raise COMMANDS["send"].error("no impersonated message to send; /impersonate first")
        self._suggestion = ""
        if self.group is not None:
            await self.group_turn("normal", text=text)
            return
        await self.run_turn(self.chats.send, text)

    async def cmd_prefill(self, arg: str) -> None:
        self.prefill = arg or None
        if arg:
            out.print(f"[dim]{say('the next reply starts with: {text}', text=escape(arg))}[/]")
        else:
            out.print(f"[dim]{say('prefill off')}[/]")

    async def cmd_stop(self, arg: str) -> None:
        no_argument(COMMANDS["stop"], arg)
        if not self.chats.stop(self.chat_id):
            out.print(f"[dim]{say('nothing is generating')}[/]")

    async def cmd_qr(self, arg: str) -> None:
        command = COMMANDS["qr"]
        replies = QuickReplies(self.tk.store, owner=self.tk.owner)
        verb, _, rest = arg.partition(" ")
        label, _, text = rest.strip().partition(" ")
        if not arg:
            saved = await self._bar_replies()
            for reply in saved:
                out.print(f"[bold]{escape(reply.label)}[/] {escape(reply.message)}")
            if not saved:
                out.print(f"[dim]{say('no quick replies; /qr add LABEL TEXT saves one')}[/]")
        elif verb == "add":
            if not label or not text.strip():
                raise command.error("/qr add needs a label and the text to send")
            await replies.save(label, text.strip())
            out.print(f"[dim]{say('saved quick reply {label}', label=escape(label))}[/]")
        elif verb == "remove":
            if not label or text:
                raise command.error("/qr remove needs one label")
            await replies.remove(label)
            out.print(f"[dim]{say('removed quick reply {label}', label=escape(label))}[/]")
        else:
            if rest:
                raise command.error(f"a label is one word; to save it: /qr add {verb} TEXT")
            if self._qr_depth >= 3:
                raise command.error("quick replies call each other too deeply")
            reply = await self._bar_reply(verb)
            self._qr_depth += 1
            try:
                commands, lines = quick_reply_lines(reply.message)
                ours = all(split_command(line)[0] in COMMANDS for line in lines)
                if reply.message.lstrip().startswith("/") and not (commands and ours):
                    # an STscript (SillyTavern's rule: a reply starting with "/")
                    await self.run_script(reply.message)
                    return
                for line in lines:
                    if not commands:
                        await self.run_turn(self.chats.send, line)
                    elif not await self.command(line):
                        break
            finally:
                self._qr_depth -= 1

    async def _bar_replies(self) -> list[QuickReply]:
        """The replies of the chat's quick-reply bar: the sets bound globally (``Default``,
        where ``/qr add`` saves, unless unbound), to the chat and to its character."""
        bar = await QuickReplyBindings(self.tk.store, self.tk.owner).bar(self.chat_id)
        return [reply for item in bar if item.visible for reply in item.set.qr_list]

    async def _bar_reply(self, label: str) -> QuickReply:
        for reply in await self._bar_replies():
            if reply.label == label:
                return reply
        raise NotFound(f"no quick reply {label!r} (/qr lists them)")
