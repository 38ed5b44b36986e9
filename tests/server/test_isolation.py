"""Owner isolation, route by route: bob (another user) calls every route that names a
resource with the ids and names of ann's resources, and gets 404 (or 403) every time; every
listing bob reads shows nothing of ann's; afterwards ann's data is exactly as it was.

The matrix is built from the app's own routes: a route this table does not cover fails the
test, so a new route cannot skip the check."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx

from tavernkit.server.routes.documents import DOCUMENT_PATHS

from ._cards import LOREBOOK, card_file
from .conftest import Users

#: JSON bodies valid enough to reach the owner check (method, path template) -> body
BODIES: dict[tuple[str, str], Any] = {
    ("PUT", "/characters/{ref}"): {"spec": "chara_card_v2", "data": {"name": "Mira"}},
    ("POST", "/characters/{ref}/rename"): {"name": "Stolen"},
    ("POST", "/characters/{ref}/duplicate"): {"name": "Stolen"},
    ("PUT", "/characters/{ref}/avatar"): {},
    ("PUT", "/characters/{ref}/fav"): {"fav": True},
    ("PUT", "/characters/{ref}/lorebooks"): {"books": []},
    ("PUT", "/characters/{ref}/writer"): {"profile": None, "preset": None},
    ("PATCH", "/chats/{chat_id}"): {"name": "Stolen"},
    ("POST", "/chats/{chat_id}/branch"): {},
    ("POST", "/chats/{chat_id}/tree"): {"index": 1},
    ("PUT", "/chats/{chat_id}/path"): {"branch": "main"},
    ("POST", "/chats/{chat_id}/messages"): {"name": "bob", "text": "hi"},
    ("PATCH", "/chats/{chat_id}/messages/{index}"): {"text": "stolen"},
    ("PUT", "/chats/{chat_id}/messages/{index}/swipe"): {"swipe": 0},
    ("PUT", "/chats/{chat_id}/messages/{index}/hidden"): {"hidden": True},
    ("PUT", "/chats/{chat_id}/variables/{name}"): {"value": 1},
    ("POST", "/chats/{chat_id}/group-turns"): {"text": "hi"},
    ("PUT", "/chats/{chat_id}/summary"): {"text": "stolen"},
    ("PATCH", "/groups/{ref}"): {"muted": [], "strategy": "manual"},
    ("POST", "/groups/{ref}/chats"): {},
    ("PUT", "/mcp/servers/{name}/enabled"): {"enabled": False},
    ("PUT", "/mcp/servers/{name}/tools/{tool}/enabled"): {"enabled": False},
    ("PUT", "/variables/{name}"): {"value": 1},
    ("POST", "/chats/{chat_id}/turns"): {"text": "hi"},
    ("POST", "/chats/{chat_id}/script"): {"script": "/sendas name=bob stolen"},
    ("PUT", "/chats/{chat_id}/quick-replies"): {"sets": []},
    ("PUT", "/characters/{ref}/quick-replies"): {"sets": []},
    ("POST", "/chats/{chat_id}/quick-replies/click"): {"set": "Default", "label": "x"},
    ("POST", "/chats/{chat_id}/script/runs/{run_id}/answer"): {"question": 1, "button": "ok"},
    ("PUT", "/ui/chats/{chat_id}/authors-note"): {"text": "stolen"},
    ("POST", "/ui/lorebooks/{ref}/test"): {"text": "hi"},
    ("POST", "/lorebooks/{ref}/rename"): {"name": "Stolen"},
    ("POST", "/lorebooks/{ref}/duplicate"): {"name": "Stolen"},
    ("POST", "/lorebooks/{ref}/bindings"): {"scope": "global"},
    ("POST", "/lorebooks/{ref}/entries"): {"key": ["stolen"]},
    ("PUT", "/lorebooks/{ref}/entries/{uid}"): {"key": ["stolen"]},
    ("PATCH", "/lorebooks/{ref}/entries/{uid}"): {"content": "stolen"},
    ("PUT", "/chats/{chat_id}/persona"): {"persona": None},
    ("PUT", "/characters/{ref}/persona"): {"persona": None},
    ("PUT", "/personas/{ref}/avatar"): {},
    ("PATCH", "/profiles/{name}"): {"model": "stolen"},
    ("PATCH", "/regex/scripts/{ref}"): {"findRegex": "/stolen/"},
    ("PUT", "/regex/scripts/{ref}/position"): {"position": 0},
    ("PUT", "/regex/scripts/{ref}/enabled"): {"enabled": False},
    ("PUT", "/regex/characters/{ref}/allowed"): {"allowed": True},
    ("PUT", "/regex/presets/{ref}/allowed"): {"allowed": True},
    ("PUT", "/profiles/{name}/fallbacks"): {"entries": []},
    **{("PUT", f"/{p}/{{ref}}"): {"name": "X", "base_url": "http://x"} for p in DOCUMENT_PATHS},
}
#: routes that name nothing of a user's (or only the caller's own account)
NOT_OWNED = {
    "/health",
    "/backups/latest",
    "/auth/login",
    "/auth/logout",
    "/auth/me",
    "/openapi.json",
    "/ui/presets/chat/defaults",
    "/ui/presets/textgen/defaults",
}
#: the query a listing needs: bob searches for the text of ann's message
LISTING_PARAMS: dict[str, dict[str, str]] = {"/search/messages": {"q": "ann's secret"}}
#: writes by name into the caller's own namespace: bob's lands in his, ann's stays as it was
UPSERTS = {("PUT", "/variables/{name}")}
#: admin-only: bob is refused whatever he names
ADMIN_ONLY = {
    "/users",
    "/users/{user_id}",
    "/users/{user_id}/password",
    "/shared/profiles",
    "/shared/profiles/{name}",
    "/metrics",  # the operator's counters (or the scrape token's)
}


async def _ann_world(ann: httpx.AsyncClient) -> dict[str, str]:
    """Ann's resources, one of each kind; the values each path parameter takes."""
    r = await ann.post("/import", files={"file": card_file("Mira")})
    char_id = r.json()[0]["id"]
    chat = (await ann.post("/chats", json={"character": "Mira"})).json()["id"]
    await ann.post(f"/chats/{chat}/messages", json={"name": "ann", "text": "ann's secret"})
    await ann.put(f"/chats/{chat}/variables/mood", json={"value": "private"})
    await ann.put("/variables/secret", json={"value": "ann's"})
    await ann.post("/profiles", json={"name": "annp", "keys": ["sk-ann-0123456789"]})
    token = (await ann.get("/auth/tokens")).json()[0]["id"]
    r = await ann.post("/groups", json={"name": "ann-crew", "members": ["Mira"]})
    assert r.status_code == 201, r.text
    group = r.json()["id"]
    # a name that never resolves (RFC 6761): stored unchecked, never reached
    mcp = {"name": "annm", "url": "http://mcp.invalid/mcp", "token": "ann-mcp-token-0123"}
    assert (await ann.post("/mcp/servers", json=mcp)).status_code == 201
    script = {"scriptName": "ann-rx", "findRegex": "/secret/g", "replaceString": "x"}
    r = await ann.post("/regex/scripts", json=script)
    assert r.status_code == 201, r.text
    regex_script = r.json()["id"]
    # a script of ann's waiting for her answer (its run id is what bob tries to answer)
    asking = {"script": "/input Secret? | /setvar key=mood {{pipe}}", "interactive": True}
    run = (await ann.post(f"/chats/{chat}/script", json=asking)).json()["run"]
    docs = {}
    for path in DOCUMENT_PATHS:
        body = LOREBOOK if path == "lorebooks" else {"name": f"ann-{path}", "base_url": "http://a"}
        r = await ann.post(f"/{path}", json=body)
        assert r.status_code == 201, (path, r.text)
        docs[path] = r.json()["id"]
    return {
        "char": char_id,
        "chat": chat,
        "token": token,
        "group": group,
        "regex": regex_script,
        "run": run,
        **{f"doc:{p}": i for p, i in docs.items()},
    }


def _fill(template: str, world: dict[str, str]) -> list[str]:
    """The concrete URLs of ``template`` aimed at ann's resources (by id, and by name where a
    route takes names)."""
    if template.startswith("/characters/{ref}"):
        return [template.replace("{ref}", world["char"]), template.replace("{ref}", "Mira")]
    if template.startswith(("/chats/{chat_id}", "/ui/chats/{chat_id}")):
        url = template.replace("{chat_id}", world["chat"]).replace("{index}", "1")
        url = url.replace("{turn_id}", "a" * 32)  # any turn: the chat is checked first
        url = url.replace("{run_id}", world["run"])  # ann's script, waiting for her
        return [url.replace("{swipe}", "0").replace("{name}", "mood")]
    if template == "/v1/models/{model}":
        return ["/v1/models/character/Mira", "/v1/models/profile/annp"]
    if template == "/ui/lorebooks/{ref}/test":
        return [template.replace("{ref}", world["doc:lorebooks"])]
    if template.startswith("/lorebooks/{ref}/"):
        url = template.replace("{uid}", "0").replace("{scope}", "global")
        return [url.replace("{ref}", world["doc:lorebooks"]), url.replace("{ref}", "Harbour")]
    if template == "/ui/profiles/{name}/test":
        return [template.replace("{name}", "annp")]
    if template.startswith("/personas/{ref}/"):
        return [template.replace("{ref}", world["doc:personas"])]
    if template.startswith("/export/{kind}/{ref}"):
        return [f"/export/character/{world['char']}", "/export/character/Mira"]
    if template.startswith("/groups/{ref}"):
        return [template.replace("{ref}", world["group"]), template.replace("{ref}", "ann-crew")]
    if template.startswith("/mcp/servers/{name}"):
        return [template.replace("{name}", "annm").replace("{tool}", "add")]
    if template.startswith("/regex/scripts/{ref}"):
        return [template.replace("{ref}", world["regex"]), template.replace("{ref}", "ann-rx")]
    if template.startswith("/regex/characters/{ref}"):
        return [template.replace("{ref}", world["char"]), template.replace("{ref}", "Mira")]
    if template.startswith("/regex/presets/{ref}"):
        return [template.replace("{ref}", world["doc:presets/chat"])]
    if template.startswith("/profiles/{name}"):
        return [template.replace("{name}", "annp")]
    if template == "/variables/{name}":
        return ["/variables/secret"]
    if template == "/auth/tokens/{token_id}":
        return [f"/auth/tokens/{world['token']}"]
    for path in DOCUMENT_PATHS:
        if template == f"/{path}/{{ref}}":
            return [template.replace("{ref}", world[f"doc:{path}"])]
    raise AssertionError(f"route {template} is not in the isolation matrix")


async def _snapshot(ann: httpx.AsyncClient, world: dict[str, str]) -> list[Any]:
    chat = world["chat"]
    reads = [
        "/characters",
        f"/characters/{world['char']}",
        f"/chats/{chat}",
        f"/chats/{chat}/messages",
        f"/chats/{chat}/variables",
        f"/chats/{chat}/summary",
        f"/chats/{chat}/script/runs",  # ann's run still waits on her question, unanswered
        f"/groups/{world['group']}",
        "/mcp/servers",
        "/memory/settings",
        "/settings",
        "/variables",
        "/profiles",
        "/regex",
        "/auth/tokens",
        *(f"/{p}/{world[f'doc:{p}']}" for p in DOCUMENT_PATHS),
    ]
    out = []
    for url in reads:
        r = await ann.get(url)
        assert r.status_code == 200, (url, r.text)
        out.append(r.json())
    for token in out[reads.index("/auth/tokens")]:
        del token["last_used"]  # ann's own requests move it
    return out


async def test_no_route_reaches_another_users_data(users: Users) -> None:
    ann, bob = users.ann, users.bob
    world = await _ann_world(ann)
    before = await _snapshot(ann, world)
    paths = users.server.app.openapi()["paths"]
    checked = 0
    for template, operations in paths.items():
        if template in NOT_OWNED:
            continue
        for method, operation in sorted(operations.items()):
            method = method.upper()
            if template in ADMIN_ONLY:
                url = template.replace("{user_id}", "x").replace("{name}", "x")
                r = await bob.request(method, url, json={})
                assert r.status_code == 403, (method, template, r.text)
                continue
            if "{" not in template:
                if method == "GET":  # a listing: nothing of ann's in it
                    r = await bob.get(template, params=LISTING_PARAMS.get(template))
                    assert r.status_code == 200, (template, r.text)
                    for secret in ("Mira", "ann", world["chat"], world["char"], "annp"):
                        assert secret not in r.text, (template, secret)
                continue
            for url in _fill(template, world):
                body = BODIES.get((method, template))
                if body is None and "requestBody" in operation:
                    raise AssertionError(f"{method} {template}: no body in BODIES")
                r = await bob.request(method, url, json=body)
                if (method, template) in UPSERTS:
                    assert r.status_code == 200, (method, url, r.text)
                    continue
                assert r.status_code == 404, (method, url, r.status_code, r.text)
                error = r.json()["error"]
                if template.startswith("/v1/"):  # the OpenAI facade answers in OpenAI's shape
                    assert error["code"] == "model_not_found", (url, error)
                else:
                    assert error["type"] == "NotFound"
                checked += 1
    assert checked >= 60, checked
    assert await _snapshot(ann, world) == before


async def test_the_same_names_are_separate_records(users: Users) -> None:
    ann, bob = users.ann, users.bob
    for client in (ann, bob):
        r = await client.post("/import", files={"file": card_file("Mira")})
        assert r.status_code == 201 and r.json()[0]["status"] == "imported"
    await bob.post("/characters/Mira/rename", json={"name": "Bob's Mira"})
    assert [c["name"] for c in (await ann.get("/characters")).json()["items"]] == ["Mira"]
    assert [c["name"] for c in (await bob.get("/characters")).json()["items"]] == ["Bob's Mira"]
