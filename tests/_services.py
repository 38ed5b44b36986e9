"""Real PostgreSQL and Redis servers for the tests, started once per test session.

:func:`start_postgres` makes a throwaway cluster (``initdb`` + ``pg_ctl``) in a temporary folder
and starts it on a free loopback port; :func:`start_redis` runs ``redis-server`` on a free port
with persistence off. Both are stopped (and their folders removed) when the session ends.

``initdb`` and ``postgres`` refuse to run as root, so as root both run as the ``postgres`` user
(``runuser``), which owns the cluster's folder. A missing binary is a skip that says what to
install, except in CI (``CI`` set), where it fails: CI must test both backends.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["PostgresCluster", "RedisServer", "missing", "start_postgres", "start_redis"]


def missing(what: str, install: str) -> None:
    """Skip (outside CI) or fail (in CI) because ``what`` is not installed."""
    message = f"{what} not found: install it ({install}) to run these tests"
    if os.environ.get("CI"):
        pytest.fail(f"CI needs {message}", pytrace=False)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    return None


@dataclass
class PostgresCluster:
    port: int
    user: str
    data: Path
    #: how it was started (``pg_ctl``'s folder, ``-o`` options and log): what
    #: :meth:`stop_server` and :meth:`start_server` run it with
    bindir: Path | None = None
    options: str = ""
    log: Path | None = None

    def _pg_ctl(self, *action: str) -> None:
        assert self.bindir is not None and self.log is not None
        argv = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", self.options]
        argv += ["-l", str(self.log), "-w", *action]
        subprocess.run(_as_cluster_owner(argv), check=True, capture_output=True)

    def stop_server(self) -> None:
        """Stop it (``-m fast``: its connections are cut, as in a restart)."""
        self._pg_ctl("-m", "fast", "stop")

    def start_server(self) -> None:
        self._pg_ctl("start")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    async def create_database(self) -> str:
        """A fresh, empty database; its URL."""
        import asyncpg  # the scale extra: only the tests that use PostgreSQL need it

        # letters only: tests look for pieces of made-up secrets in reprs, which name the URL
        name = "t_" + "".join(random.choices("ghjkmnpqrstvwxyz", k=16))
        admin = await asyncpg.connect(self.url())
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        return self.url(name)

    async def drop_database(self, url: str) -> None:
        import asyncpg

        name = url.rsplit("/", 1)[-1]
        admin = await asyncpg.connect(self.url())
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def _as_cluster_owner(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@contextlib.contextmanager
def start_postgres() -> Iterator[PostgresCluster]:
    """A running throwaway cluster (user ``tk``, trust auth on 127.0.0.1 only)."""
    bindir = _pg_bin()
    if bindir is None:
        missing("PostgreSQL's server (initdb, pg_ctl)", "apt-get install -y postgresql")
        raise AssertionError("unreachable")
    root = Path(tempfile.mkdtemp(prefix="tk-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data, log = root / "data", root / "server.log"
    port = _free_port()
    initdb = [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "tk", "-E", "UTF8"]
    # Durability is pointless for a throwaway cluster; the tests measure nothing on it.
    options = f"-p {port} -k {root} -h 127.0.0.1 -c fsync=off -c full_page_writes=off"
    start = [str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w"]
    try:
        for argv in ([*initdb, "--locale=C", "--no-sync"], [*start, "start"]):
            subprocess.run(_as_cluster_owner(argv), check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"cannot start PostgreSQL: {exc.stderr or exc.stdout}") from exc
    try:
        yield PostgresCluster(
            port=port, user="tk", data=data, bindir=bindir, options=options, log=log
        )
    finally:
        subprocess.run(
            _as_cluster_owner([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class RedisServer:
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@contextlib.contextmanager
def start_redis() -> Iterator[RedisServer]:
    """A running ``redis-server`` on a free loopback port, nothing saved to disk."""
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server", "apt-get install -y redis-server")
        raise AssertionError("unreachable")
    port = _free_port()
    workdir = Path(tempfile.mkdtemp(prefix="tk-redis-"))
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    proc = subprocess.Popen(
        [*argv, "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {port}")
            time.sleep(0.02)
        yield RedisServer(port=port)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
