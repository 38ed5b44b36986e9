"""The ``tavernkit chat`` slash commands that show or change the chat's stored messages
without a turn (:class:`MessageCommands`, a base of :class:`~tavernkit.cli.chat_session.Session`):
``/history``, ``/open``, ``/edit``, ``/delete``, ``/undo``, ``/branch``, ``/summary``,
``/think``. Those that delete or overwrite text snapshot the chat first, so ``/undo`` puts it
back (:mod:`tavernkit.chat.undo`)."""

from __future__ import annotations

from rich.markup import escape

from tavernkit.assist.summary import current_summary, set_summary, summarize
from tavernkit.chat.incomplete import incomplete_reply
from tavernkit.chat.service import ChatService
from tavernkit.chat.undo import UndoStack, take_snapshot
from tavernkit.cli.chat_display import out, print_message
from tavernkit.cli.language import say
from tavernkit.cli.slash import COMMANDS, message_number, no_argument, positive_number
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message

__all__ = ["MessageCommands"]


class MessageCommands:
    """The message commands of one session; the session holds the Tavern, the chat and its
    undo stack."""

    tk: Tavern
    chats: ChatService
    chat_id: str
    undo_stack: UndoStack
    last_reasoning: str

    async def _count(self) -> int:
        info = await self.tk.store.get_chat_info(self.chat_id, owner=self.tk.owner)
        return info.message_count

    async def _snapshot(self, label: str) -> None:
        snapshot = await take_snapshot(self.tk.store, self.chat_id, label, owner=self.tk.owner)
        self.undo_stack.push(snapshot)

    async def history(self, last: int = 20) -> None:
        # the newest ``last`` messages only, whatever the chat's length
        window = await self.tk.store.load_chat_window(self.chat_id, last=last, owner=self.tk.owner)
        if not window.tail:
            out.print(f"[dim]{say('no messages')}[/]")
            return
        start = window.info.message_count - len(window.tail)
        if start:
            out.print(f"[dim]{say('… {count} earlier messages', count=start)}[/]")
        shown = await self.chats.shown(self.chat_id, window.tail)
        for entry in window.tail:
            message = Message.model_validate(entry.data)
            unfinished = incomplete_reply(entry)
            print_message(
                entry.position,
                message,
                incomplete=unfinished.text() if unfinished else "",
                shown=shown.get(entry.position),
            )

    async def cmd_undo(self, arg: str) -> None:
        no_argument(COMMANDS["undo"], arg)
        if not len(self.undo_stack):
            raise COMMANDS["undo"].error("nothing to undo in this session")
        snapshot = await self.undo_stack.undo(self.tk.store, owner=self.tk.owner)
        self.chat_id = snapshot.chat_id
        out.print(f"[dim]{say('undid /{label}', label=escape(snapshot.label))}[/]")

    async def cmd_delete(self, arg: str) -> None:
        command = COMMANDS["delete"]
        index = message_number(command, arg, await self._count())
        await self._snapshot("delete")
        await self.chats.delete(self.chat_id, index)
        out.print(f"[dim]{say('deleted message #{index} (/undo brings it back)', index=index)}[/]")

    async def cmd_edit(self, arg: str) -> None:
        command = COMMANDS["edit"]
        count = await self._count()
        first, _, text = arg.partition(" ")
        if first.isdigit():
            index = message_number(command, first, count)
            text = text.strip()
            if not text:
                raise command.error(f"no new text for message #{index}")
        else:
            if not arg:
                raise command.error("no new text (an empty message is /delete)")
            if count == 0:
                raise command.error("the chat has no messages")
            index, text = count - 1, arg
        await self._snapshot("edit")
        message = await self.chats.edit(self.chat_id, index, text)
        print_message(index, message)
        out.print(f"[dim]{say('(/undo brings the old text back)')}[/]")

    async def cmd_branch(self, arg: str) -> None:
        command = COMMANDS["branch"]
        index = message_number(command, arg, await self._count()) if arg else None
        info = await self.chats.branch(self.chat_id, index)
        self.chat_id = info.id
        out.print(
            f"[dim]{say('now in branch {name} ({id})', name=escape(info.name), id=info.id)}[/]"
        )

    async def cmd_history(self, arg: str) -> None:
        last = positive_number(COMMANDS["history"], arg, "the count") if arg else 20
        await self.history(last)

    async def cmd_open(self, arg: str) -> None:
        if not arg:
            raise COMMANDS["open"].error("name the chat to open (/chats lists them)")
        info = await self.tk.store.get_chat_info(arg, owner=self.tk.owner)
        self.chat_id = info.id
        out.print(f"[dim]{say('now in chat {name}', name=escape(info.name))}[/]")
        await self.history()

    async def cmd_summary(self, arg: str) -> None:
        """The rolling summary (the memory's, as ``tavernkit memory summary`` shows it): shown,
        made now with the main model whatever the summary source, or replaced; a change is
        undoable like an edit."""
        command = COMMANDS["summary"]
        verb, _, text = arg.partition(" ")
        if not arg:
            summary = await current_summary(self.tk.runtime, self.chat_id)
            out.print(escape(summary) if summary else "[dim](no summary)[/]")
        elif verb == "now":
            if text.strip():
                raise command.error("/summary now takes no text")
            await self._snapshot("summary")
            out.print(f"[dim]{say('summarizing…')}[/]")
            try:
                update = await summarize(self.tk.context(self.chat_id), force=True)
            except BaseException:
                self.undo_stack.discard_last()  # nothing was stored
                raise
            if update is None:
                self.undo_stack.discard_last()
                out.print(f"[dim]{say('no summary made (nothing new to summarize)')}[/]")
            else:
                out.print(escape(update.text))
                out.print(
                    "[dim]"
                    + say("stored on message #{index} (/undo drops it)", index=update.message_index)
                    + "[/]"
                )
        elif verb == "set":
            if not text.strip():
                raise command.error("/summary set needs the new summary's text")
            await self._snapshot("summary")
            index = await set_summary(self.tk.runtime, self.chat_id, text.strip())
            out.print(
                "[dim]"
                + say(
                    "summary stored on message #{index} (/undo brings the old one back)",
                    index=index,
                )
                + "[/]"
            )
        else:
            raise command.error(
                f"unknown {verb!r}: write /summary, /summary now or /summary set TEXT"
            )

    async def cmd_think(self, arg: str) -> None:
        no_argument(COMMANDS["think"], arg)
        stored = await self.chats.load(self.chat_id)
        reasoning = self.last_reasoning
        for entry in reversed(stored.messages):
            message = Message.model_validate(entry.data)
            if not message.is_user and message.has_reasoning:
                reasoning = message.current_reasoning
                break
        if reasoning:
            out.print(reasoning, style="dim italic", markup=False, highlight=False)
        else:
            out.print(f"[dim]{say('no reasoning')}[/]")
