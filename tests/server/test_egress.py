"""The egress policy (issue 34, finding 2) against a real server with accounts on loopback:
a loopback listener stands for the internal service a user must not reach, and records every
connection it gets (there must be none). A non-admin's profile, MCP server, custom endpoint
and memory embedder pointing at it, however loopback is spelled, are refused as they are
saved (403 ``EgressRefused`` naming the policy and the field) and, stored earlier (written to
the store directly), when they are used: the profile test, ``/tasks``, the facade, a turn, an
MCP tool listing, a turn's embeddings. An allow-listed network is reached; an admin, the
server's shared profile and local mode are not restricted."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2 as httpx
import pytest

from chat._server import HangingServer
from chat.conftest import stock_world
from generation._scripted_server import Reply, ScriptedServer
from tavernkit.errors import ServerConfigError
from tavernkit.facade import Tavern
from tavernkit.models.mcp import McpServer
from tavernkit.models.profile import ConnectionProfile
from tavernkit.server.settings import ServerSettings

from ._live import LiveServer, live_server
from ._sse import parse_events
from .conftest import PASSWORD, settings, token_client

KEY = "sk-ann-own-0123456789"
#: an address of the loopback network that the tests' admin allow-lists
ALLOWED = "127.0.0.2"


@dataclass
class Listener:
    """The forbidden target: a loopback port (IPv4 and, where there is one, IPv6)."""

    port: int
    hits: list[str] = field(default_factory=list)

    def spellings(self) -> list[str]:
        """One URL per way of writing this machine's loopback (and its unspecified) address."""
        port = self.port
        return [
            f"http://localhost:{port}",
            f"http://127.1:{port}",
            f"http://0.0.0.0:{port}",
            f"http://2130706433:{port}",
            f"http://[::1]:{port}",
            f"http://127.0.0.1:{port}",
            f"http://0x7f.1:{port}",
            f"http://[::ffff:127.0.0.1]:{port}",
            f"http://LOCALHOST.:{port}",
        ]


@contextlib.asynccontextmanager
async def forbidden() -> AsyncIterator[Listener]:
    listener = Listener(0)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        listener.hits.append(str(writer.get_extra_info("sockname")[0]))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    first = await asyncio.start_server(handle, "127.0.0.1", 0)
    listener.port = first.sockets[0].getsockname()[1]
    servers = [first]
    with contextlib.suppress(OSError):  # a machine without IPv6 loopback
        servers.append(await asyncio.start_server(handle, "::1", listener.port))
    try:
        yield listener
    finally:
        for server in servers:
            server.close()


@dataclass
class Egress:
    server: LiveServer
    target: Listener
    #: an upstream on the allow-listed address
    allowed: ScriptedServer
    admin: httpx.AsyncClient
    ann: httpx.AsyncClient

    async def ann_tavern(self) -> Tavern:
        state = self.server.state
        user, _ = await state.accounts.store.find_user("ann")
        return state.tavern.for_owner(str(user.owner))


@pytest.fixture
async def egress(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Egress]:
    fields: dict[str, object] = {"accounts": True, "allow_egress": (f"{ALLOWED}/32",)}
    fields.update(getattr(request, "param", {}))
    async with (
        forbidden() as target,
        ScriptedServer([Reply(text="OK")], host=ALLOWED) as allowed,
        live_server(settings(tmp_path / "home", **fields)) as server,
    ):
        accounts = server.state.accounts
        await accounts.create_user("admin", PASSWORD, is_admin=True)
        await accounts.create_user("ann", PASSWORD)
        admin, ann = [await token_client(server, name) for name in ("admin", "ann")]
        try:
            yield Egress(server, target, allowed, admin, ann)
        finally:
            await admin.aclose()
            await ann.aclose()


def _refused(response: httpx.Response, field: str | None) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["type"] == "EgressRefused", error
    assert "egress policy" in error["message"]
    assert error.get("field") == field


async def test_a_users_internal_destinations_are_refused_as_they_are_saved(egress: Egress) -> None:
    ann = egress.ann
    urls = [
        *egress.target.spellings(),
        "http://169.254.169.254/latest/meta-data",
        "http://metadata.google.internal/computeMetadata/v1",
        "http://[fd00:ec2::254]/",
        "http://10.0.0.1:8080",
        "http://192.168.1.1",
    ]
    for url in urls:
        profile = {"name": "p", "base_url": url + "/v1", "keys": [KEY]}
        _refused(await ann.post("/profiles", json=profile), "base_url")
        mcp = {"name": "m", "url": url + "/mcp", "token": "mcp-token-0123"}
        _refused(await ann.post("/mcp/servers", json=mcp), "url")
        endpoint = {"name": "e", "base_url": url + "/v1"}
        _refused(await ann.post("/endpoints", json=endpoint), "base_url")
    for url in ("file:///etc/passwd", "gopher://127.0.0.1:25/"):
        _refused(await ann.post("/profiles", json={"name": "p", "base_url": url}), "base_url")
    # nothing was stored, not even the MCP token
    assert (await ann.get("/profiles")).json() == []
    assert (await ann.get("/mcp/servers")).json() == []
    assert (await ann.get("/endpoints")).json()["items"] == []
    ann_tk = await egress.ann_tavern()
    assert await ann_tk.store.list_api_keys(owner=ann_tk.owner) == []

    # an embedder naming a profile stored before the policy (written directly) is refused too
    old = ConnectionProfile(name="old", base_url=f"http://127.1:{egress.target.port}/v1")
    await ann_tk.store.put("connection_profile", old, owner=ann_tk.owner)
    patch = {"vectors": {"embedder": "profile:old", "enabled_chats": True}}
    _refused(await ann.patch("/memory/settings", json=patch), "vectors.embedder")
    assert (await ann.get("/memory/settings")).json()["vectors"]["embedder"] == "local"

    # the admin is not restricted; an allow-listed address is allowed to anyone
    admin_profile = {"name": "a", "base_url": f"http://127.0.0.1:{egress.target.port}/v1"}
    assert (await egress.admin.post("/profiles", json=admin_profile)).status_code == 201
    allowed = {"name": "p", "base_url": egress.allowed.base_url + "/v1", "keys": [KEY]}
    assert (await ann.post("/profiles", json=allowed)).status_code == 201
    assert egress.target.hits == []


async def test_records_stored_earlier_are_refused_when_used(egress: Egress) -> None:
    ann, target = egress.ann, egress.target
    ann_tk = await egress.ann_tavern()
    await stock_world(ann_tk, f"http://127.1:{target.port}")  # the profile "scripted"
    server = McpServer(name="old", transport="http", url=f"http://localhost:{target.port}/mcp")
    await ann_tk.mcp.add(server)
    chat = (await ann_tk.chats.new_chat("Mira")).id

    _refused(await ann.post("/ui/profiles/scripted/test"), None)
    _refused(await ann.get("/mcp/servers/old/tools"), None)

    task = {"task_messages": [{"role": "user", "content": "hi"}], "api_preset_name": "scripted"}
    r = await ann.post("/tasks", json=task)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_input"
    assert "egress policy" in r.json()["error"]["message"]

    messages = [{"role": "user", "content": "hi"}]
    body = {"model": "profile/scripted", "messages": messages}
    r = await ann.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    assert "egress policy" in r.json()["error"]["message"]

    started = await ann.post(f"/chats/{chat}/turns", json={"text": "Hi"})
    assert started.status_code == 202, started.text
    events = parse_events((await ann.get(started.json()["events"])).content)
    errors = [e.data for e in events if e.type == "error"]
    assert errors and errors[0]["class"] == "egress_refused", errors
    assert "egress policy" in errors[0]["message"]
    assert events[-1].data["status"] == "failed"
    assert target.hits == []


async def test_a_turns_embeddings_go_through_the_policy(egress: Egress) -> None:
    """The chat runs on the allow-listed upstream; its memory embedder's profile points at
    the forbidden one: the turn fails naming the policy, and nothing reaches the target."""
    ann, target = egress.ann, egress.target
    ann_tk = await egress.ann_tavern()
    await stock_world(ann_tk, egress.allowed.base_url)
    embedder = ConnectionProfile(name="vectors", base_url=f"http://[::1]:{target.port}/v1")
    await ann_tk.store.put("connection_profile", embedder, owner=ann_tk.owner)
    settings_now = await ann_tk.settings()
    vectors = settings_now.memory.vectors
    vectors.enabled_chats = True
    vectors.embedder = "profile:vectors"
    vectors.embedding_model = "e1"
    await ann_tk.store.put_settings(settings_now, owner=ann_tk.owner)
    chat = (await ann_tk.chats.new_chat("Mira")).id
    started = await ann.post(f"/chats/{chat}/turns", json={"text": "Hi"})
    assert started.status_code == 202, started.text
    events = parse_events((await ann.get(started.json()["events"])).content)
    errors = [e.data for e in events if e.type == "error"]
    assert errors and errors[0]["class"] == "EgressRefused", errors
    assert "egress policy" in errors[0]["message"]
    assert target.hits == []


async def test_an_allow_listed_network_is_reached(egress: Egress) -> None:
    ann = egress.ann
    profile = {"name": "mine", "base_url": egress.allowed.base_url + "/v1", "keys": [KEY]}
    assert (await ann.post("/profiles", json=profile)).status_code == 201
    r = await ann.post("/ui/profiles/mine/test")
    assert r.status_code == 200 and r.json()["ok"], r.text
    assert r.json()["text"] == "OK"
    assert egress.allowed.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    # the network is allowed, not the whole of loopback
    other = {**profile, "name": "other", "base_url": "http://127.0.0.3:9/v1"}
    _refused(await ann.post("/profiles", json=other), "base_url")


async def test_a_redirect_from_an_allowed_host_to_a_forbidden_one_is_not_followed(
    egress: Egress,
) -> None:
    target = egress.target
    egress.allowed.script(
        Reply(status=307, headers={"location": f"http://127.0.0.1:{target.port}/v1/chat"})
    )
    profile = {"name": "mine", "base_url": egress.allowed.base_url + "/v1", "keys": [KEY]}
    assert (await egress.ann.post("/profiles", json=profile)).status_code == 201
    r = await egress.ann.post("/ui/profiles/mine/test")
    assert r.status_code == 200 and r.json()["ok"] is False, r.text
    assert target.hits == []


@pytest.mark.parametrize("egress", [{"shared_profile": "pool"}], indirect=True)
async def test_the_servers_shared_profile_is_not_restricted(egress: Egress) -> None:
    """The shared profile is the admin's: it may sit on loopback without an allow-list, and
    a user's turn falls back to it when the user's own profile is refused."""
    async with HangingServer([Reply(text="from the pool")]) as pool:
        shared = {"name": "pool", "base_url": pool.base_url + "/v1", "keys": ["sk-pool-0123"]}
        r = await egress.admin.post("/shared/profiles", json=shared)
        assert r.status_code == 201, r.text
        ann_tk = await egress.ann_tavern()
        await stock_world(ann_tk, f"http://localhost:{egress.target.port}")
        chat = (await ann_tk.chats.new_chat("Mira")).id
        started = await egress.ann.post(f"/chats/{chat}/turns", json={"text": "Hi"})
        events = parse_events((await egress.ann.get(started.json()["events"])).content)
        assert events[-1].data["status"] == "completed", [e.data for e in events]
        assert "".join(e.data["text"] for e in events if e.type == "text") == "from the pool"
    assert egress.target.hits == []


async def test_local_mode_reaches_loopback(local: LiveServer) -> None:
    """Accounts off: the one local user owns the machine, loopback included."""
    async with ScriptedServer([Reply(text="OK")]) as upstream:
        client = local.client()
        profile = {"name": "here", "base_url": upstream.base_url + "/v1"}
        assert (await client.post("/profiles", json=profile)).status_code == 201
        r = await client.post("/ui/profiles/here/test")
        assert r.status_code == 200 and r.json()["ok"] and r.json()["text"] == "OK", r.text
        await client.aclose()


async def test_the_servers_renderer_fetches_no_url(egress: Egress) -> None:
    """The template ``url()`` function is off in a Tavern's renderer (a library user turns it
    on with :class:`~tavernkit.text.render.UrlPolicy`): a card cannot make the server fetch."""
    renderer = egress.server.state.tavern.prompt_renderer
    template = f"{{{{url::GET::http://127.0.0.1:{egress.target.port}/}}}}"
    result = await renderer.render_template(template)
    assert result.text == template
    assert egress.target.hits == []


def test_the_allow_list_is_checked_when_the_server_starts() -> None:
    ok = ServerSettings(accounts=True, allow_egress=("10.0.0.0/8", "ollama.lan", "*.corp.example"))
    assert ok.check().egress_policy() is not None
    assert ServerSettings(allow_egress=("10.0.0.0/8",)).egress_policy() is None  # local mode
    with pytest.raises(ServerConfigError, match="allow_egress"):
        ServerSettings(accounts=True, allow_egress=("not a host!",)).check()
