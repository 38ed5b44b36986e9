"""Every slash command of ``tavernkit chat`` with bad arguments: a usage line on stderr, the
session goes on, nothing is stored and nothing is sent; destructive commands are undoable."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from chat._server import Reply
from cli.test_chat_cli import ThreadServer, cli, home, messages, server
from tavernkit.cli.slash import COMMANDS
from tavernkit.facade import Tavern
from tavernkit.store import Store

__all__ = ["home", "server"]  # fixtures used here

T = TypeVar("T")

#: (input line, what the usage line must say): at least one per command taking arguments
BAD = [
    ("/swipe abc", "the swipe number must be a number, not 'abc'"),
    ("/swipe 0", "the swipe number must be 1 or more"),
    ("/swipe 9", "no swipe 9; the last reply has 2"),
    ("/regen now", "/regen takes no argument"),
    ("/continue 2", "/continue takes no argument"),
    ("/impersonate me", "/impersonate takes no argument"),
    ("/send x", "/send takes no argument"),
    ("/send", "no impersonated message to send"),
    ("/trigger Alice", "this is not a group chat"),
    ("/stop it", "/stop takes no argument"),
    ("/undo 3", "/undo takes no argument"),
    ("/undo", "nothing to undo in this session"),
    ("/delete", "a message number is needed"),
    ("/delete abc", "the message number must be a number, not 'abc'"),
    ("/delete 99", "no message #99; the chat has #0 to #2"),
    ("/delete -1", "no message #-1"),
    ("/edit", "no new text"),
    ("/edit 2", "no new text for message #2"),
    ("/edit 7 text", "no message #7"),
    ("/branch x", "the message number must be a number, not 'x'"),
    ("/branch 5", "no message #5"),
    ("/history abc", "the count must be a number"),
    ("/history 0", "the count must be 1 or more"),
    ("/note depth", "/note depth needs a number"),
    ("/note depth deep", "the depth must be a number"),
    ("/note every -1", "the every must be 0 or more"),
    ("/note role king", "the role must be system, user or assistant, not 'king'"),
    ("/rename", "a new name is needed"),
    ("/chats all", "/chats takes no argument"),
    ("/open", "name the chat to open"),
    ("/qr add x", "/qr add needs a label and the text to send"),
    ("/qr remove", "/qr remove needs one label"),
    ("/qr two words", "a label is one word"),
    ("/summary later", "unknown 'later': write /summary, /summary now or /summary set TEXT"),
    ("/summary set", "/summary set needs the new summary's text"),
    ("/summary now please", "/summary now takes no text"),
    ("/think hard", "/think takes no argument"),
    ("/prompt x", "/prompt takes no argument"),
    ("/lore x", "/lore takes no argument"),
    ("/vars x", "/vars takes no argument"),
    ("/help me", "/help takes no argument"),
]
#: commands whose every argument is valid (/prefill TEXT; a /persona or /book NAME is looked up)
ANY_ARGUMENT = {"prefill", "persona", "book", "quit"}


def test_every_command_is_driven_with_bad_arguments() -> None:
    driven = {line[1:].split(" ")[0] for line, _ in BAD}
    assert {c.name for c in COMMANDS.values()} - ANY_ARGUMENT <= driven


def test_bad_arguments_answer_usage_lines_and_change_nothing(
    home: Path, server: ThreadServer
) -> None:
    server.script(Reply(text="One."), Reply(text="Two."))
    setup = cli("chat", "Mira", input="Hi\n/swipe\n/quit\n")
    assert setup.exit_code == 0, setup.output
    before = [m.to_wire() for m in messages(home)]
    sent = len(server.bodies)
    script = "\n".join(
        [line for line, _ in BAD] + ["/nosuch", "/persona nobody", "/book nosuch", "/quit"]
    )
    result = cli("chat", "Mira", input=script + "\n")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    usage = [line for line in result.stderr.splitlines() if line.startswith("usage: ")]
    assert len(usage) == len(BAD), result.stderr
    for (line, problem), got in zip(BAD, usage, strict=True):
        name = line.split(" ")[0]
        assert got.startswith(f"usage: {COMMANDS[name[1:]].usage}  ("), (line, got)
        assert problem in got, (line, got)
    # not one of the chat's commands: run as an STscript, which knows no /nosuch either
    assert 'SlashCommandParserError: Unknown command at position 1: "/nosuch"' in result.stderr
    assert "error: no persona named 'nobody'" in result.stderr
    assert "error: no lorebook 'nosuch'" in result.stderr
    assert [m.to_wire() for m in messages(home)] == before
    assert len(server.bodies) == sent


def test_edit_delete_and_regen_are_undone_in_reverse_order(
    home: Path, server: ThreadServer
) -> None:
    server.script(Reply(text="First."), Reply(text="Second."), Reply(text="Third."))
    assert cli("chat", "Mira", input="Hi\nMore\n/quit\n").exit_code == 0
    original = [m.to_wire() for m in messages(home)]
    assert [m["mes"] for m in original][1:] == ["Hi", "First.", "More", "Second."]
    script = ["/edit 2 Changed.", "/delete 1", "/regen", "/undo", "/undo", "/undo", "/quit"]
    result = cli("chat", "Mira", input="\n".join(script) + "\n")
    assert result.exit_code == 0, result.output
    assert "undid /regen" in result.output and "undid /edit" in result.output
    assert [m.to_wire() for m in messages(home)] == original


def test_an_edit_of_one_message_is_undone_by_rewriting_that_message_only(
    home: Path, server: ThreadServer
) -> None:
    server.script(Reply(text="Reply."))
    assert cli("chat", "Mira", input="Hi\n/quit\n").exit_code == 0
    before = messages(home)
    result = cli("chat", "Mira", input="/edit 1 Hello\n/undo\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "(/undo brings the old text back)" in result.output
    assert [m.mes for m in messages(home)] == [m.mes for m in before]


def test_help_lists_every_command_and_history_of_an_empty_chat(home: Path) -> None:
    result = cli("chat", "Mira", "--new", input="/delete 0\n/history\n/help\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "no messages" in result.stdout
    lines = [line.removeprefix("> ") for line in result.stdout.splitlines()]  # after the prompt
    listed = {line.split(" ")[0] for line in lines if line.startswith("/")}
    assert listed == {f"/{c.name}" for c in COMMANDS.values()}


def test_summary_is_shown_made_replaced_and_undone(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="First."), Reply(text="Second."))
    assert cli("chat", "Mira", input="Hi\nMore\n/quit\n").exit_code == 0
    before = [m.to_wire() for m in messages(home)]
    server.script(Reply(text="Mira met a stranger who said hi twice."))
    script = ["/summary", "/summary now", "/summary", "/summary set They sailed north.", "/summary"]
    result = cli("chat", "Mira", input="\n".join([*script, "/quit"]) + "\n")
    assert result.exit_code == 0, result.output
    assert "(no summary)" in result.stdout
    assert result.stdout.count("Mira met a stranger who said hi twice.") == 2  # made, then shown
    assert "They sailed north." in result.stdout.split("summary stored on message")[-1]
    # the summary request went to the model: the chat's messages and SillyTavern's prompt
    summary_request = server.bodies[-1]
    assert "summar" in str(summary_request["messages"]).lower()
    stored = messages(home)
    assert stored[-2].extra.memory == "They sailed north."  # the summary box: second-to-last
    # both changes are undone in reverse order; nothing else changed
    result = cli("chat", "Mira", input="/summary set Again.\n/undo\n/quit\n")
    assert result.exit_code == 0, result.output
    assert messages(home)[-2].extra.memory == "They sailed north."
    assert [m.to_wire() for m in messages(home)][:-2] == before[:-2]


def _in_store(home: Path, work: Callable[[Store, str, str], Awaitable[T]]) -> T:
    async def run() -> T:
        async with Tavern(home, load_plugins=False) as tk:
            chat_id = (await tk.store.list_chats(owner=tk.owner))[0].id
            return await work(tk.store, chat_id, tk.owner)

    return asyncio.run(run())


def test_undoing_deletes_keeps_the_chats_other_branch(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="First."), Reply(text="Second."))
    assert cli("chat", "Mira", input="Hi\nMore\n/quit\n").exit_code == 0
    original = [m.to_wire() for m in messages(home)]

    async def branch(store: Store, chat_id: str, owner: str) -> str:
        made = await store.fork_chat(chat_id, 3, owner=owner)  # another turn after "First."
        await store.append_message(
            chat_id, {"name": "Ada", "is_user": True, "mes": "Instead"}, owner=owner
        )
        await store.switch_branch(chat_id, "main", owner=owner)
        return made

    other = _in_store(home, branch)
    result = cli("chat", "Mira", input="/delete 1\n/undo\n/delete 2\n/undo\n/quit\n")
    assert result.exit_code == 0, result.output
    assert [m.to_wire() for m in messages(home)] == original

    async def other_path(store: Store, chat_id: str, owner: str) -> list[str]:
        await store.switch_branch(chat_id, other, owner=owner)
        return [m.data["mes"] for m in (await store.load_chat(chat_id, owner=owner)).messages]

    assert _in_store(home, other_path)[1:] == ["Hi", "First.", "Instead"]
