"""The web UI's files and routes over a real uvicorn (no browser): every file is served with
the Content-Security-Policy, only plain names of shipped files are served, and the author's
note is one checked metadata write."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from tavernkit.server.routes.ui import CONTENT_SECURITY_POLICY

from ._live import LiveServer

WEB = resources.files("tavernkit.server") / "web"


async def test_the_page_and_every_shipped_file_carry_the_policy(local: LiveServer) -> None:
    suffixes = (".js", ".css", ".html")
    names = sorted(f.name for f in WEB.iterdir() if f.name.endswith(suffixes))
    # a screen's components in a folder of their own
    names += sorted(
        f"{d.name}/{f.name}"
        for d in WEB.iterdir()
        if d.is_dir() and not d.name.startswith((".", "_"))
        for f in d.iterdir()
        if f.name.endswith(suffixes)
    )
    assert {"index.html", "app.js", "markdown.js", "style.css", "chat/screen.js"} <= set(names)
    async with local.client() as client:
        page = await client.get("/")
        assert page.status_code == 200 and 'src="/ui/app.js"' in page.text
        for name in ["", *names]:
            r = await client.get(f"/ui/{name}" if name else "/")
            assert r.status_code == 200, name
            assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert r.headers["x-content-type-options"] == "nosniff"
        js = await client.get("/ui/app.js")
        assert js.headers["content-type"].startswith("text/javascript")


async def test_only_plain_names_of_shipped_files_are_served(local: LiveServer) -> None:
    async with local.client() as client:
        for name in [
            "nope.js",
            "..%2Fapp.py",
            "%2E%2E%2F__init__.py",
            ".hidden.js",
            "app.py",
            "chat/nope.js",
            "chat/..%2F..%2Fapp.py",
            "..%2Froutes/ui.py",
            ".git/config.js",
            "chat/.hidden.js",
            "__pycache__/x.js",
        ]:
            r = await client.get(f"/ui/{name}")
            assert r.status_code == 404, name  # no route, or no such UI file
            assert "tavernkit" not in r.text


async def test_the_authors_note_is_stored_and_checked(local: LiveServer) -> None:
    tk = local.state.tavern
    await tk.library.import_bytes(b'{"name": "Mira", "first_mes": "Hi."}', source="mira.json")
    chat = (await tk.chats.new_chat("Mira")).id
    async with local.client() as client:
        url = f"/ui/chats/{chat}/authors-note"
        assert (await client.get(url)).json()["text"] == ""
        r = await client.put(url, json={"text": "Fog.", "depth": 2, "position": 1})
        assert r.status_code == 200
        meta = (await tk.chats.load(chat)).header["chat_metadata"]
        assert (meta["note_prompt"], meta["note_depth"], meta["note_position"]) == ("Fog.", 2, 1)
        bad = await client.put(url, json={"text": "x", "position": 9})
        assert bad.status_code == 422
        assert (await tk.chats.load(chat)).header["chat_metadata"]["note_prompt"] == "Fog."
        missing = await client.get("/ui/chats/nope/authors-note")
        assert missing.status_code == 404


async def test_the_demo_character_is_added_once(local: LiveServer) -> None:
    async with local.client() as client:
        first = await client.post("/ui/demo-character")
        again = await client.post("/ui/demo-character")
        assert first.status_code == again.status_code == 201
        assert first.json() == again.json() and first.json()["name"] == "Wren"
        listed = (await client.get("/characters")).json()
        assert [c["name"] for c in listed["items"]] == ["Wren"]


def test_the_stylesheet_closes_every_block() -> None:
    # an unclosed @media block silently moves every later rule under its condition (a merge
    # left one: the phone's rules applied only at phone size, a desktop form showed hidden fields)
    depth = 0
    for number, line in enumerate((WEB / "style.css").read_text().splitlines(), 1):
        if depth and line.startswith(("/*", ".", "#", "@", "[")) and not line.startswith("@media"):
            raise AssertionError(f"style.css:{number}: a top-level rule inside an open block")
        depth += line.count("{") - line.count("}")
        assert depth >= 0, f"style.css:{number}: a '}}' closes nothing"
    assert depth == 0, "style.css ends inside a block"


def _ui_imports() -> dict[str, set[str]]:
    """Each shipped module -> the modules it imports (paths relative to web/)."""
    root = Path(str(WEB))
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.js"):
        name = path.relative_to(root).as_posix()
        targets = re.findall(
            r'^\s*(?:import|export)\b[^;]*?from\s+"(\.[^"]+)"', path.read_text(), re.M
        )
        graph[name] = {
            (path.parent / t).resolve().relative_to(root.resolve()).as_posix() for t in targets
        }
    return graph


def test_the_ui_modules_form_no_import_circle() -> None:
    graph = _ui_imports()
    assert all(t in graph for targets in graph.values() for t in targets), "an import names no file"
    assert not any("app.js" in targets for targets in graph.values()), "nothing imports the shell"
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            raise AssertionError("import circle: " + " -> ".join((*path, name)))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, (*path, name))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())
