"""What ``tavernkit chat`` and ``profile test`` say when something fails: one line on stderr
naming the cause a person can act on, with the safe code; nothing stored by a command that
fails for a reason known before writing; stopped replies marked; Ctrl-C handled."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from chat._server import HangReply, Reply
from cli.test_chat_cli import _MAIN, ThreadServer, chat_ids, cli, home, messages, server
from tavernkit.cli.failures import Where, failure_line, host_of
from tavernkit.errors import ProviderError, ProviderTimeout
from tavernkit.facade import Tavern
from tavernkit.generation.result import TurnError

__all__ = ["home", "server"]  # fixtures used here


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dead_port_names_the_host_on_stderr(home: Path) -> None:
    port = _closed_port()
    added = cli(
        "profile", "add", "dead", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m9"
    )
    assert added.exit_code == 0, added.output
    result = cli("chat", "Mira", "--once", "Hello?", "--profile", "dead")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line == (
        f"error: cannot connect to 127.0.0.1:{port} (profile 'dead', openai, model 'm9'): "
        "is the server running and the URL right? [network]"
    )
    assert "cannot connect" not in result.stdout
    tested = cli("profile", "test", "dead")
    assert tested.exit_code == 1
    assert f"failed: cannot connect to 127.0.0.1:{port}" in tested.stderr


def test_a_wrong_key_is_named_as_rejected_by_the_provider(
    home: Path, server: ThreadServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TK_TEST_KEY", "sk-wrong-key-1234")
    body = {"error": {"message": "Incorrect API key sk-wrong-key-1234", "type": "auth"}}
    server.script(Reply(status=401, error=body))
    result = cli("chat", "Mira", "--once", "Hello?")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: openai rejected the key in $TK_TEST_KEY (profile 'scripted'")
    assert line.endswith("check the key [auth 401]")
    assert "sk-wrong" not in result.output
    server.script(Reply(status=401, error=body))
    tested = cli("profile", "test")
    assert tested.exit_code == 1
    assert "rejected the key in $TK_TEST_KEY" in tested.stderr
    assert "auth_missing" not in tested.output and "sk-wrong" not in tested.output


def test_a_corrupt_model_file_is_named(tmp_path: Path) -> None:
    gguf = tmp_path / "broken.gguf"
    error = TurnError("unknown", "unknown", "smollm2", cause=ProviderError("bad magic"))
    line = failure_line(error, Where(source="local", model_file=gguf))
    assert line.startswith(f"the embedded model file {gguf} could not be loaded")
    assert line.endswith("[unknown]") and "bad magic" not in line
    assert host_of("https://api.example.com:8443/v1") == "api.example.com:8443"
    assert host_of("http://localhost/v1") == "localhost"
    assert host_of(None) is None


def test_a_mistyped_profile_or_persona_stores_nothing(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="Hi."))
    assert cli("chat", "Mira", "--once", "first").exit_code == 0
    before = messages(home)
    for option, value, what in (
        ("--profile", "scriptd", "connection profile"),
        ("--persona", "Nobody", "persona"),
    ):
        for _ in range(2):
            result = cli("chat", "Mira", "--once", "lost?", option, value)
            assert result.exit_code == 1
            assert f"no {what} named {value!r}" in result.stderr
        # interactive: the session starts no chat and stores nothing either
        result = cli("chat", "Mira", "--new", option, value, input="typed\n/quit\n")
        assert result.exit_code == 1, result.output
    assert [m.mes for m in messages(home)] == [m.mes for m in before]
    assert len(chat_ids(home)) == 1
    assert len(server.bodies) == 1


def _read_until(stream: IO[bytes], needle: str, timeout: float = 60) -> str:
    """The child's output up to ``needle`` (read without blocking, so a hang fails)."""
    seen = b""
    deadline = time.monotonic() + timeout
    fd = stream.fileno()
    os.set_blocking(fd, False)
    while needle.encode() not in seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"{needle!r} never came; got {seen!r}")
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            chunk = b""
        if chunk:
            seen += chunk
        else:
            time.sleep(0.05)
    return seen.decode()


def test_ctrl_c_stops_a_reply_then_exits_at_the_prompt(home: Path, server: ThreadServer) -> None:
    server.script(HangReply(text="The lamp is lit. and the rest never arrives", hang_after=4))
    env = {**os.environ, "TAVERNKIT_HOME": str(home), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN, "chat", "Mira"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        _read_until(proc.stdout, "/help for commands")
        proc.stdin.write(b"Hello\n")
        proc.stdin.flush()
        _read_until(proc.stdout, "The lamp is lit.")
        proc.send_signal(signal.SIGINT)  # during the reply: stops it
        _read_until(proc.stdout, "[stopped; the text shown is kept]")
        proc.send_signal(signal.SIGINT)  # at the prompt: ends the session
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdin.close()
        proc.stdout.close()
    reply = messages(home)[-1]
    assert reply.mes.startswith("The lamp is lit.") and not reply.is_user
    # on resume the stopped reply is shown as stopped, not as complete
    resumed = cli("chat", "Mira", input="/quit\n")
    assert resumed.exit_code == 0, resumed.output
    assert "[stopped before the end; /continue extends it, /swipe retries]" in resumed.stdout


def test_a_cut_reply_is_marked_incomplete_on_resume(home: Path, server: ThreadServer) -> None:
    server.script(Reply(text="Half"))
    assert cli("chat", "Mira", "--once", "Hello").exit_code == 0

    async def mark_partial() -> None:
        # what a crash mid-reply leaves: the swipe flagged partial (see test_chat_cli)
        async with Tavern(home, load_plugins=False) as tk:
            chat = (await tk.store.list_chats(owner=tk.owner))[0]
            stored = await tk.store.load_chat(chat.id, owner=tk.owner)
            last = stored.messages[-1]
            await tk.store.update_swipe_text(last.id, 0, "Half", complete=False, owner=tk.owner)

    asyncio.run(mark_partial())
    resumed = cli("chat", "Mira", input="/history 1\n/quit\n")
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.count("Half") == 2
    notice = "[incomplete (interrupted); /continue extends it, /swipe retries]"
    assert resumed.stdout.count(notice) == 2


def test_a_rejected_stored_key_is_named_by_label_and_fingerprint(
    home: Path, server: ThreadServer
) -> None:
    added = cli(
        "profile", "add", "work", "--base-url", server.server.base_url + "/v1", "-m", "m1",
        "--key", "prompt", "--default", input="sk-stored-secret-9876\n",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    server.script(Reply(status=401), Reply(status=401))
    result = cli("chat", "Mira", "--once", "Hello?")
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: openai rejected key 'work' (")
    assert "(profile 'work', openai, model 'm1'): check the key [auth 401]" in line
    assert "sk-stored-secret-9876" not in result.output
    tested = cli("profile", "test")
    assert "failed: openai rejected key 'work' (" in tested.stderr
    assert "sk-stored-secret-9876" not in tested.output


@pytest.mark.parametrize(
    ("klass", "code", "cause", "says"),
    [
        ("timeout", "timeout", ProviderTimeout("t", phase="first_byte"), "api.test:8443 did not"),
        ("quota", "429", None, "openai says the quota of key 'k' (sk-…1) is used up"),
        ("rate_limit", "429", None, "openai is rate limiting key 'k' (sk-…1)"),
        ("overloaded", "503", None, "api.test:8443 failed on its side"),
        ("model_unavailable", "404", None, "openai does not serve 'm'"),
        ("context_too_long", "400", None, "the prompt is longer than the model's context"),
        ("missing_credential", "missing_credential", None, "no API key is configured"),
        ("keys_cooling", "keys_cooling", None, "every key is cooling down"),
        ("content_filter", "content_filter", None, "openai's safety filter blocked"),
        ("empty_response", "empty_response", None, "generation failed (profile 'p'"),
    ],
)
def test_every_error_class_has_a_line_naming_what_to_check(
    klass: Any, code: str, cause: BaseException | None, says: str
) -> None:
    where = Where("p", "openai", "https://api.test:8443/v1", "key 'k' (sk-…1)")
    line = failure_line(TurnError(klass, code, "m", cause=cause), where)
    assert says in line, line
    tag = klass if code == klass else f"{klass} {code}"
    assert line.endswith(f"[{tag}]") and "(profile 'p', openai, model 'm')" in line


def test_a_failed_reply_is_marked_incomplete_live_and_on_resume_with_its_cause(
    home: Path, server: ThreadServer
) -> None:
    server.script(
        Reply(text="The lamp is lit and then", break_after=3),
        *[Reply(status=500)] * 6,
    )
    result = cli("chat", "Mira", input="Hello\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "The lamp is" in result.stdout
    assert "[incomplete: the reply was cut off; /continue extends it" in result.stdout
    assert result.stderr.startswith("error: ")
    resumed = cli("chat", "Mira", input="/quit\n")
    (line,) = [x for x in resumed.stdout.splitlines() if x.strip().startswith("[incomplete (")]
    assert line.strip().endswith("; /continue extends it, /swipe retries]")
    # a failed turn says why, by class and safe code (a crash: just "interrupted")
    assert line.strip().startswith("[incomplete (interrupted: interrupted);"), line


def test_a_failed_turn_names_the_profile_the_characters_writer_chose(home: Path) -> None:
    port = _closed_port()
    added = cli(
        "profile", "add", "dead", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m9"
    )
    assert added.exit_code == 0, added.output

    async def give_mira_a_writer() -> None:
        async with Tavern(home, load_plugins=False) as tk:
            stored = await tk.store.get_record("character", "Mira", owner=tk.owner)
            card = json.loads(json.dumps(stored.data))
            card["data"]["extensions"]["tavernkit"] = {"writer": {"profile": "dead"}}
            await tk.store.put(
                "character", card, owner=tk.owner, id=stored.info.id, name=stored.info.name
            )

    asyncio.run(give_mira_a_writer())
    result = cli("chat", "Mira", "--once", "Hello?")  # the selected profile is "scripted"
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert f"cannot connect to 127.0.0.1:{port} (profile 'dead', openai, model 'm9')" in line
