"""The container recipe in deploy/ (Containerfile, compose.yaml, nginx.conf, .env.example),
checked against the CLI it runs, since no container runtime runs here: every ``TAVERNKIT_*``
variable it sets is one tavernkit reads, its health checks hit routes the app serves, the
proxy balances both tavernkit services on their port, both share one database, one Redis and
one key folder, and the image's entrypoint is ``tavernkit serve``. The last test runs two
``tavernkit serve`` processes with exactly a service's environment (only the addresses moved
to the test's PostgreSQL, Redis and folders) and no command line: both get ready.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import sys
import time
import tomllib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
_SRC = str(ROOT / "src")
_RUN = "from tavernkit.cli import main; main()"
#: the services that run tavernkit (built from the Containerfile)
TAVERNKIT_SERVICES = ("tavernkit-a", "tavernkit-b")


# -- reading the recipe -------------------------------------------------------------------------
def env_file(path: Path, *, commented: bool = False) -> dict[str, str]:
    """``NAME=value`` lines of an env file (``commented``: also the ``# NAME=value`` ones it
    suggests)."""
    pattern = r"^#\s*([A-Z][A-Z0-9_]*)=(.*)$" if commented else r"^([A-Z][A-Z0-9_]*)=(.*)$"
    return {m[1]: m[2].strip() for m in re.finditer(pattern, path.read_text(), re.MULTILINE)}


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?error}`` (a name the env lacks
    with no default fails, as compose does)."""

    def value(match: re.Match[str]) -> str:
        name, op, arg = match[1], match[2], match[3]
        if env.get(name):
            return env[name]
        if op == ":-":
            return arg
        raise AssertionError(f"compose.yaml needs ${name}, which .env.example does not set")

    return re.sub(r"\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}", value, text)


def compose() -> dict[str, Any]:
    rendered = interpolate((DEPLOY / "compose.yaml").read_text(), env_file(DEPLOY / ".env.example"))
    loaded = yaml.safe_load(rendered)  # SafeLoader resolves the `<<: *tavernkit` merges
    assert isinstance(loaded, dict)
    return loaded


def containerfile() -> list[tuple[str, str]]:
    """The Containerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    lines = (DEPLOY / "Containerfile").read_text().replace("\\\n", " ").splitlines()
    words = (line.strip() for line in lines)
    return [
        (w.split(None, 1)[0].upper(), w.split(None, 1)[1] if " " in w else "")
        for w in words
        if w and not w.startswith("#")
    ]


def instructions(keyword: str) -> list[str]:
    return [args for word, args in containerfile() if word == keyword]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for args in instructions("ENV"):
        for word in shlex.split(args):
            name, _, value = word.partition("=")
            env[name] = value
    return env


def service_env(service: str) -> dict[str, str]:
    """What the service's process sees: the image's ENV, under the env file, under the
    service's ``environment`` (compose's order)."""
    spec = compose()["services"][service]
    assert spec["env_file"] == ".env"
    env = {**image_env(), **env_file(DEPLOY / ".env.example")}
    env.update({name: str(value) for name, value in spec["environment"].items()})
    return env


def nginx() -> str:
    return re.sub(r"#[^\n]*", "", (DEPLOY / "nginx.conf").read_text())


def nginx_block(kind: str, text: str) -> str:
    match = re.search(kind + r"\s*\{(.*?)\n\}", text, re.DOTALL)
    assert match, f"nginx.conf has no {kind} block"
    return match[1]


# -- what tavernkit reads -----------------------------------------------------------------------
def serve_variables() -> set[str]:
    """The variables ``tavernkit serve``'s options read (typer's ``envvar``)."""
    import typer.main

    from tavernkit.cli import app
    from tavernkit.cli.lazy import StandIn

    group = typer.main.get_command(app)
    serve = group.get_command(group.context_class(group), "serve")  # type: ignore[attr-defined]
    if isinstance(serve, StandIn):  # the group lists a stand-in; its options are the real one's
        serve = serve.real()
    assert serve is not None
    names: set[str] = set()
    for param in serve.params:
        envvar = getattr(param, "envvar", None)
        names.update([envvar] if isinstance(envvar, str) else envvar or ())
    return names


@pytest.fixture(scope="module")
def read_by_tavernkit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[set[str]]:
    """Every ``TAVERNKIT_*`` variable tavernkit reads, each shown to be read: the serve
    options', the admin password's, the data folder's and the key folder's."""
    from tavernkit.cli.serve import PASSWORD_ENV
    from tavernkit.store.paths import data_dir
    from tavernkit.store.postgres import default_key_dir
    from tavernkit.store.secret_key import (
        PREVIOUS_SECRET_KEY_ENV,
        SECRET_KEY_ENV,
        resolve_previous_secret_key,
        resolve_secret_key,
    )

    folder = tmp_path_factory.mktemp("read")
    assert data_dir(create=False, environ={"TAVERNKIT_HOME": str(folder)}) == folder
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TAVERNKIT_KEY_DIR", str(folder / "keys"))
        assert default_key_dir("postgresql://tk@db/tk") == folder / "keys"
    given = resolve_secret_key({SECRET_KEY_ENV: "k" * 40, "TAVERNKIT_HOME": str(folder)})
    assert given.origin == "env"
    previous = resolve_previous_secret_key({PREVIOUS_SECRET_KEY_ENV: "p" * 40})
    assert previous is not None and previous.key_id != given.key_id
    yield serve_variables() | {
        PASSWORD_ENV,
        "TAVERNKIT_HOME",
        "TAVERNKIT_KEY_DIR",
        SECRET_KEY_ENV,
        PREVIOUS_SECRET_KEY_ENV,
    }


# -- the checks ---------------------------------------------------------------------------------
def test_every_tavernkit_variable_of_the_recipe_is_one_tavernkit_reads(
    read_by_tavernkit: set[str],
) -> None:
    assert "TAVERNKIT_DATABASE_URL" in read_by_tavernkit  # the introspection found the options
    set_by = {
        "Containerfile": set(image_env()),
        ".env.example": set(env_file(DEPLOY / ".env.example")),
        ".env.example (suggested)": set(env_file(DEPLOY / ".env.example", commented=True)),
        **{name: set(compose()["services"][name]["environment"]) for name in TAVERNKIT_SERVICES},
    }
    unknown = {
        where: sorted(n for n in names if n.startswith("TAVERNKIT_") and n not in read_by_tavernkit)
        for where, names in set_by.items()
    }
    assert all(not names for names in unknown.values()), unknown
    assert {"TAVERNKIT_CREATE_ADMIN", "TAVERNKIT_ADMIN_PASSWORD"} <= set_by[".env.example"]


def test_the_services_serve_with_accounts_off_loopback() -> None:
    for service in TAVERNKIT_SERVICES:
        env = service_env(service)
        assert env["TAVERNKIT_HOST"] == "0.0.0.0" and env["TAVERNKIT_ACCOUNTS"] == "true"
        assert env["TAVERNKIT_CREATE_ADMIN"] and len(env["TAVERNKIT_ADMIN_PASSWORD"]) >= 10


def test_both_services_share_one_database_one_redis_and_one_secret_key() -> None:
    spec = compose()
    services = spec["services"]
    envs = [service_env(name) for name in TAVERNKIT_SERVICES]
    for name in ("TAVERNKIT_DATABASE_URL", "TAVERNKIT_REDIS_URL", "TAVERNKIT_SECRET_KEY"):
        assert len({env[name] for env in envs}) == 1, name
    env = envs[0]
    database = urlsplit(env["TAVERNKIT_DATABASE_URL"])
    postgres = services["postgres"]["environment"]
    assert database.scheme == "postgresql" and database.hostname == "postgres"
    assert (database.username, database.password, database.path) == (
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
        "/" + postgres["POSTGRES_DB"],
    )
    assert urlsplit(env["TAVERNKIT_REDIS_URL"]).hostname == "redis"
    assert any(v.endswith(":/var/lib/postgresql/data") for v in services["postgres"]["volumes"])
    # the API keys are sealed in the database with that one secret key: no key folder to share;
    # each data folder is its own
    mounts = [
        dict(reversed(v.split(":")[:2]) for v in services[n]["volumes"]) for n in TAVERNKIT_SERVICES
    ]
    assert len(env["TAVERNKIT_SECRET_KEY"]) >= 32
    assert all(set(m) == {env["TAVERNKIT_HOME"]} for m in mounts)
    assert len({m[env["TAVERNKIT_HOME"]] for m in mounts}) == len(TAVERNKIT_SERVICES)
    for name in TAVERNKIT_SERVICES:
        needs = services[name]["depends_on"]
        assert {needs[s]["condition"] for s in ("postgres", "redis")} == {"service_healthy"}


def served_paths(tmp_path: Path) -> set[str]:
    from tavernkit.server.app import create_app
    from tavernkit.server.settings import ServerSettings

    app = create_app(ServerSettings(home=tmp_path))
    return set(app.openapi()["paths"])  # its routers are mounted lazily; the schema lists all


def test_health_checks_hit_routes_the_server_has(tmp_path: Path) -> None:
    paths = served_paths(tmp_path)
    (probe,) = instructions("HEALTHCHECK")
    assert "/health/live" in probe and "TAVERNKIT_PORT" in probe
    for service in TAVERNKIT_SERVICES:
        check = " ".join(compose()["services"][service]["healthcheck"]["test"])
        port = service_env(service)["TAVERNKIT_PORT"]
        assert f"http://127.0.0.1:{port}/health/ready" in check
    assert {"/health/live", "/health/ready"} <= paths


def test_the_proxy_balances_both_services_on_their_port_without_buffering() -> None:
    conf = nginx()
    upstream = nginx_block(r"upstream tavernkit", conf)
    servers = set(re.findall(r"^\s*server\s+([\w.-]+):(\d+)", upstream, re.MULTILINE))
    assert servers == {(s, service_env(s)["TAVERNKIT_PORT"]) for s in TAVERNKIT_SERVICES}
    location = nginx_block(r"location /", conf)
    assert re.search(r"proxy_pass\s+http://tavernkit;", location)
    assert re.search(r"proxy_buffering\s+off;", location)
    assert re.search(r"proxy_http_version\s+1\.1;", location)
    read_timeout = re.search(r"proxy_read_timeout\s+(\d+)([smh]?);", location)
    assert read_timeout, "a long proxy_read_timeout for event streams"
    seconds = int(read_timeout[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[read_timeout[2]]
    assert seconds >= 600
    services = compose()["services"]
    proxy = services["proxy"]
    assert "./nginx.conf:/etc/nginx/conf.d/default.conf:ro" in proxy["volumes"]
    assert set(proxy["depends_on"]) == set(TAVERNKIT_SERVICES)
    assert {c["condition"] for c in proxy["depends_on"].values()} == {"service_healthy"}
    assert all("ports" not in services[s] for s in TAVERNKIT_SERVICES)  # only through it
    # uvicorn takes X-Forwarded-For from the proxy's address alone
    address = proxy["networks"]["backend"]["ipv4_address"]
    assert {service_env(s)["FORWARDED_ALLOW_IPS"] for s in TAVERNKIT_SERVICES} == {address}


def test_the_image_runs_tavernkit_serve_as_a_user_of_its_own() -> None:
    assert instructions("FROM") == ["python:3.11-slim"]
    assert json.loads(instructions("ENTRYPOINT")[0]) == ["tavernkit", "serve"]
    assert instructions("CMD") == []  # no command line: the environment configures it
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["tavernkit"] == "tavernkit.cli:main"
    (user,) = instructions("USER")
    assert user not in {"root", "0"} and "useradd" in " ".join(instructions("RUN"))
    assert any(re.search(r"pip install \S*\[server,scale\]", run) for run in instructions("RUN"))
    assert any(args.split()[0] == "src" for args in instructions("COPY"))
    assert instructions("EXPOSE") == [image_env()["TAVERNKIT_PORT"]]


def test_the_build_context_holds_what_the_image_copies() -> None:
    """.dockerignore keeps everything out of the context but what the COPY lines name."""
    copied = {w for args in instructions("COPY") for w in args.split()[:-1]}
    kept = {
        line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines() if line[:1] == "!"
    }
    assert copied == kept and all((ROOT / name).exists() for name in copied)


def test_the_example_env_holds_no_secret_and_the_real_one_is_ignored() -> None:
    for name, value in env_file(DEPLOY / ".env.example").items():
        if "PASSWORD" in name:
            assert value.startswith("change-"), name
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "deploy/.env" in ignored


# -- the recipe's environment, run for real -----------------------------------------------------
def run_env(service: str, *, database: str, redis: str, folder: Path) -> dict[str, str]:
    """The service's environment with its addresses moved onto this machine: the test's
    PostgreSQL and Redis, folders of its own, a free loopback port. The rest is the recipe's."""
    env = service_env(service)
    moved = {
        "TAVERNKIT_HOST": "127.0.0.1",  # the tests listen on loopback only
        "TAVERNKIT_PORT": "0",
        "TAVERNKIT_DATABASE_URL": database,
        "TAVERNKIT_REDIS_URL": redis,
        "TAVERNKIT_HOME": str(folder / service),
    }
    assert set(moved) <= set(env)
    return {**env, **moved}


async def start(env: dict[str, str]) -> tuple[asyncio.subprocess.Process, str]:
    """``tavernkit serve`` with no command line, as the image's entrypoint runs it."""
    outside = {k: v for k, v in os.environ.items() if not k.startswith("TAVERNKIT_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _RUN,
        "serve",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**outside, "PYTHONPATH": _SRC, **env},
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 90)).decode()
    if not line.startswith("tavernkit serving http://"):
        proc.kill()
        said = (await proc.stderr.read()).decode()
        raise AssertionError(f"tavernkit serve did not start: {line!r} {said[-2000:]}")
    return proc, line


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def ready(url: str) -> httpx.Response:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
        while True:
            try:
                answer = await client.get("/health/ready")
                if answer.status_code == 200 or time.monotonic() > deadline:
                    return answer
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)


@pytest.fixture
async def processes() -> AsyncIterator[list[asyncio.subprocess.Process]]:
    started: list[asyncio.subprocess.Process] = []
    yield started
    await asyncio.gather(*(stop(proc) for proc in started))


async def test_the_services_environment_serves_ready_on_postgres_and_redis(
    postgres_url: str,
    redis_url: str,
    tmp_path: Path,
    processes: list[asyncio.subprocess.Process],
) -> None:
    """Both services at once (as compose starts them), then one restarted: each is ready and
    signs the admin of .env.example in (made once, kept on the restart)."""
    envs = {
        service: run_env(service, database=postgres_url, redis=redis_url, folder=tmp_path)
        for service in TAVERNKIT_SERVICES
    }
    admin = {
        "name": envs["tavernkit-a"]["TAVERNKIT_CREATE_ADMIN"],
        "password": envs["tavernkit-a"]["TAVERNKIT_ADMIN_PASSWORD"],
    }

    async def serves(env: dict[str, str]) -> str:
        proc, banner = await start(env)
        processes.append(proc)
        assert banner.rstrip().endswith("(accounts on, PostgreSQL, Redis)"), banner
        url = banner.split()[2]
        answer = await ready(url)
        assert answer.status_code == 200, answer.text
        assert answer.json()["checks"] == {"database": "ok", "redis": "ok"}
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            login = await client.post("/auth/login", json=admin)
            assert login.status_code == 200 and login.json()["is_admin"] is True
        return url

    await asyncio.gather(*(serves(env) for env in envs.values()))
    await stop(processes.pop(0))
    restarted = await serves(envs[TAVERNKIT_SERVICES[0]])
    # the probes themselves, as the image and compose run them, pass on a serving process
    port = urlsplit(restarted).port
    assert port is not None
    assert await probe_exit("image", port) == 0
    assert await probe_exit("compose", port) == 0


async def probe_exit(which: str, port: int) -> int:
    """The exit status of the image's HEALTHCHECK command (a shell line) or the compose
    service's health check (an exec list) against ``port`` in place of the recipe's."""
    recipe_port = service_env(TAVERNKIT_SERVICES[0])["TAVERNKIT_PORT"]
    outside = {k: v for k, v in os.environ.items() if not k.startswith("TAVERNKIT_")}
    env = {**outside, "TAVERNKIT_PORT": str(port)}
    if which == "image":
        line = instructions("HEALTHCHECK")[0].split(" CMD ", 1)[1]
        argv = ["/bin/sh", "-c", line.replace("python ", f"{shlex.quote(sys.executable)} ", 1)]
    else:
        test = compose()["services"][TAVERNKIT_SERVICES[1]]["healthcheck"]["test"]
        assert test[:2] == ["CMD", "python"]
        argv = [sys.executable, *(w.replace(f":{recipe_port}/", f":{port}/") for w in test[2:])]
    proc = await asyncio.create_subprocess_exec(*argv, env=env)
    return await asyncio.wait_for(proc.wait(), 30)


async def test_the_health_probes_fail_where_nothing_answers() -> None:
    """They are not vacuous: with nothing listening, both exit non-zero."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = sock.getsockname()[1]
        assert await probe_exit("image", port) != 0
        assert await probe_exit("compose", port) != 0
