"""``tavernkit serve`` as a user runs it: a real process that prints its URL and answers."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx
import pytest

from tavernkit.errors import ServerConfigError
from tavernkit.server.listen import listening_socket

_RUN = "from tavernkit.cli import main; main()"


@contextmanager
def serving(home: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``tavernkit serve --port 0`` until the block ends; the URL it printed."""
    with subprocess.Popen(
        [sys.executable, "-c", _RUN, "serve", "--port", "0", "--home", str(home), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("tavernkit serving http://"), line
            yield line.split()[2]
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _wait_up(url: str) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(f"{url}/health", timeout=5)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_serve_local_prints_url_and_serves(tmp_path: Path) -> None:
    with serving(tmp_path / "home") as url:
        assert url.startswith("http://127.0.0.1:")
        assert _wait_up(url).json() == {"status": "ok", "accounts": False}
        assert httpx.get(f"{url}/auth/me", timeout=5).json()["via"] == "local"


def refused(home: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``tavernkit serve ARGS``, which must refuse to start cleanly; its stderr."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN, "serve", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    return done.stderr + done.stdout


def test_serve_refuses_open_address_without_accounts(tmp_path: Path) -> None:
    assert "without accounts" in refused(tmp_path, "--host", "0.0.0.0")


def test_serve_refuses_a_database_url_of_another_kind_without_its_password(
    tmp_path: Path,
) -> None:
    env = {"TAVERNKIT_DATABASE_URL": "mysql://tk:Wq7Rz3Kp@db.example/tk"}
    said = refused(tmp_path, "--port", "0", env=env)
    assert "not a postgresql:// URL" in said
    assert "Wq7Rz3Kp" not in said


def test_serve_refuses_a_turn_rate_below_one(tmp_path: Path) -> None:
    assert "turn_rate needs a positive limit" in refused(tmp_path, "--turn-rate", "0")


def test_serve_refuses_a_negative_user_quota(tmp_path: Path) -> None:
    assert "user_quota_bytes must be positive" in refused(tmp_path, "--user-quota", "-1")


def test_serve_with_accounts_creates_the_admin(tmp_path: Path) -> None:
    password = "a long admin password"
    env = {"TAVERNKIT_ADMIN_PASSWORD": password}
    with serving(tmp_path / "home", "--create-admin", "root", env=env) as url:
        assert _wait_up(url).json()["accounts"] is True
        assert httpx.get(f"{url}/auth/me", timeout=5).status_code == 401
        r = httpx.post(f"{url}/auth/login", json={"name": "root", "password": password}, timeout=5)
        assert r.status_code == 200 and r.json()["is_admin"] is True


def test_serve_create_admin_again_keeps_the_admin(tmp_path: Path) -> None:
    """A container keeps ``$TAVERNKIT_CREATE_ADMIN`` set: its restart starts (the admin made
    the first time is kept, password included) instead of failing on the taken name."""
    first = {"TAVERNKIT_ADMIN_PASSWORD": "a long admin password"}
    with serving(tmp_path / "home", "--create-admin", "root", env=first) as url:
        _wait_up(url)
    again = {"TAVERNKIT_ADMIN_PASSWORD": "another long password"}
    with serving(tmp_path / "home", "--create-admin", "Root", env=again) as url:
        _wait_up(url)
        login = {"name": "root", "password": first["TAVERNKIT_ADMIN_PASSWORD"]}
        r = httpx.post(f"{url}/auth/login", json=login, timeout=5)
        assert r.status_code == 200 and r.json()["is_admin"] is True


def test_serve_create_admin_refuses_a_name_a_user_who_is_no_admin_has(tmp_path: Path) -> None:
    env = {"TAVERNKIT_ADMIN_PASSWORD": "a long admin password"}
    with (
        serving(tmp_path / "home", "--create-admin", "root", env=env) as url,
        httpx.Client(base_url=url) as admin,
    ):
        _wait_up(url)
        admin.post(
            "/auth/login", json={"name": "root", "password": env["TAVERNKIT_ADMIN_PASSWORD"]}
        )
        csrf = {"X-CSRF-Token": admin.get("/auth/me").json()["csrf_token"]}
        new = {"name": "ann", "password": "ann's own long password"}
        assert admin.post("/users", json=new, headers=csrf).status_code == 201
    assert "exists" in refused(tmp_path / "home", "--create-admin", "ann", env=env)


def test_serve_allow_egress_lets_users_reach_that_network_only(tmp_path: Path) -> None:
    """``--allow-egress`` (repeatable): a user's profile may point into the allowed network;
    the rest of loopback stays refused (403 ``EgressRefused``)."""
    password = "a long admin password"
    env = {"TAVERNKIT_ADMIN_PASSWORD": password}
    args = ("--create-admin", "root", "--allow-egress", "127.0.0.2/32", "--allow-egress", "h.lan")
    with serving(tmp_path / "home", *args, env=env) as url, httpx.Client(base_url=url) as admin:
        _wait_up(url)
        admin.post("/auth/login", json={"name": "root", "password": password})
        csrf = {"X-CSRF-Token": admin.get("/auth/me").json()["csrf_token"]}
        ann_password = "ann's own long password"
        new = {"name": "ann", "password": ann_password}
        assert admin.post("/users", json=new, headers=csrf).status_code == 201
        with httpx.Client(base_url=url) as ann:
            token = ann.post("/auth/login", json=new).json()["csrf_token"]
            headers = {"X-CSRF-Token": token}
            inside = {"name": "in", "base_url": "http://127.0.0.2:9/v1"}
            assert ann.post("/profiles", json=inside, headers=headers).status_code == 201
            outside = {"name": "out", "base_url": "http://127.0.0.1:9/v1"}
            r = ann.post("/profiles", json=outside, headers=headers)
            assert r.status_code == 403 and r.json()["error"]["type"] == "EgressRefused"


def test_serve_refuses_a_bad_egress_allowance(tmp_path: Path) -> None:
    said = refused(tmp_path, "--accounts", "--allow-egress", "not a host!")
    assert "allow_egress" in said


async def test_accepted_connections_have_nagle_off() -> None:
    # with Nagle on, each small keep-alive answer waited ~40 ms for the client's delayed ACK
    seen: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    listener = listening_socket("127.0.0.1", 0)
    server = await asyncio.start_server(on_connect, sock=listener)
    async with server:
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
    assert seen and seen[0] != 0


def test_a_taken_port_is_a_clear_error() -> None:
    taken = listening_socket("127.0.0.1", 0)
    with taken, pytest.raises(ServerConfigError, match=r"cannot listen on 127\.0\.0\.1"):
        listening_socket("127.0.0.1", taken.getsockname()[1])


def test_serve_max_upload_sets_the_upload_cap(tmp_path: Path) -> None:
    """``--max-upload`` is the server's upload cap: a body over it is 413, one under it is
    read; a size that is not one is refused before the server starts."""
    assert "--max-upload must be a positive size" in refused(tmp_path, "--max-upload", "lots")
    assert "--max-upload must be a positive size" in refused(tmp_path, "--max-upload", "0")
    with serving(tmp_path / "home", "--max-upload", "1K") as url:
        _wait_up(url)
        big = httpx.post(f"{url}/import/raw", content=b"x" * 2048, timeout=10)
        assert big.status_code == 413 and big.json()["error"]["type"] == "LimitExceeded"
        small = httpx.post(f"{url}/import/raw", content=b"{}", timeout=10)
        assert small.status_code != 413


def test_parse_size_reads_binary_units() -> None:
    from tavernkit.cli.serve import parse_size

    assert parse_size("1048576", what="x") == 1024 * 1024
    assert parse_size("512K", what="x") == 512 * 1024
    assert parse_size("64M", what="x") == parse_size("64MiB", what="x") == 64 * 1024**2
    assert parse_size("1.5g", what="x") == 3 * 1024**3 // 2
    for bad in ("", "M", "-1M", "nan", "inf", "12Q"):
        with pytest.raises(ServerConfigError):
            parse_size(bad, what="x")


def test_every_serve_option_is_also_read_from_a_tavernkit_variable() -> None:
    """``--some-option`` is ``$TAVERNKIT_SOME_OPTION`` too (``--home``: ``$TAVERNKIT_HOME``,
    which the data folder itself reads); a container sets them without a command line."""
    import typer.main

    from tavernkit.cli import app
    from tavernkit.cli.lazy import StandIn

    group = typer.main.get_command(app)
    serve = group.get_command(group.context_class(group), "serve")  # type: ignore[attr-defined]
    if isinstance(serve, StandIn):  # the group lists a stand-in; its options are the real one's
        serve = serve.real()
    assert serve is not None and len(serve.params) > 20
    missing = []
    for param in serve.params:
        if param.param_type_name != "option" or param.name == "home":
            continue
        long_name = next(o for o in param.opts if o.startswith("--"))
        wanted = "TAVERNKIT_" + long_name[2:].upper().replace("-", "_")
        named = {
            "--database": "TAVERNKIT_DATABASE_URL",
            "--redis": "TAVERNKIT_REDIS_URL",
            # beside TAVERNKIT_SECRET_KEY_PREVIOUS (the previous key as text), as the current
            # key's TAVERNKIT_SECRET_KEY and TAVERNKIT_SECRET_KEY_FILE are
            "--previous-secret-key-file": "TAVERNKIT_SECRET_KEY_PREVIOUS_FILE",
        }.get(long_name, wanted)
        if param.envvar != named:
            missing.append(long_name)
    assert not missing, missing


def test_serve_reads_its_options_from_the_environment(tmp_path: Path) -> None:
    assert "without accounts" in refused(tmp_path, env={"TAVERNKIT_HOST": "0.0.0.0"})
    said = refused(tmp_path, env={"TAVERNKIT_TURN_RATE": "0"})
    assert "turn_rate needs a positive limit" in said


def test_serve_writes_access_lines_and_takes_the_metrics_token_from_the_environment(
    tmp_path: Path,
) -> None:
    token = "mt-canary-env-0042"
    command = [sys.executable, "-c", _RUN, "serve", "--port", "0", "--home", str(tmp_path)]
    env = {**os.environ, "TAVERNKIT_METRICS_TOKEN": token}
    with subprocess.Popen(
        [*command, "--accounts"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        url = proc.stdout.readline().split()[2]
        _wait_up(url)
        scraped = httpx.get(
            f"{url}/metrics?key={token}", headers={"Authorization": f"Bearer {token}"}, timeout=5
        )
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert scraped.status_code == 200 and "tavernkit_streams_open" in scraped.text
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert {"method": "GET", "path": "/metrics", "status": 200} in [
        {k: line[k] for k in ("method", "path", "status")} for line in lines
    ]
    assert token not in err


def test_serve_script_answer_timeout_cancels_an_unanswered_question(tmp_path: Path) -> None:
    """``$TAVERNKIT_SCRIPT_ANSWER_TIMEOUT`` (``--script-answer-timeout``): a script's question
    no one answers counts as cancelled after that many seconds, not after 10 minutes."""
    from ._cards import card_file

    env = {"TAVERNKIT_SCRIPT_ANSWER_TIMEOUT": "1"}
    with serving(tmp_path / "home", env=env) as url:
        _wait_up(url)
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.post("/import", files={"file": card_file("Mira")}).status_code == 201
            chat = client.post("/chats", json={"character": "Mira"}).json()["id"]
            script = {"script": "/input Name? | /setvar key=got [{{pipe}}]", "interactive": True}
            assert client.post(f"/chats/{chat}/script", json=script).json()["status"] == "asking"
            deadline = time.monotonic() + 15
            while "[]" not in str(client.get(f"/chats/{chat}/variables").json()):
                assert time.monotonic() < deadline, "the question was not cancelled in time"
                time.sleep(0.2)
            assert client.get(f"/chats/{chat}/script/runs").json() == {"runs": []}
