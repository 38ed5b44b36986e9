"""The account rules of issue 34 (finding 8) over a real uvicorn with accounts: passwords of
10 characters or more and not a common one; user names NFKC-normalized, invisible and control
characters refused (at creation and at login); sessions that end 30 days after they began
however busy; and a deleted user's records deleted with them, or handed over to another user
by the admin's choice, with nothing of theirs left in any table of the database."""

from __future__ import annotations

import io
import sqlite3
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import httpx2 as httpx
import pytest
from PIL import Image

from tavernkit.server.accounts import MIN_PASSWORD, common_passwords
from tavernkit.store.paths import DB_FILE_NAME

from ._cards import card_file
from .conftest import PASSWORD, Users


async def _login(users: Users, name: str, password: str = PASSWORD) -> httpx.Response:
    async with users.server.client() as c:
        return await c.post("/auth/login", json={"name": name, "password": password})


# -- passwords ---------------------------------------------------------------------------


def test_the_shipped_list_holds_common_passwords_of_the_minimum_length() -> None:
    common = common_passwords()
    assert MIN_PASSWORD == 10
    assert {"1234567890", "qwertyuiop", "password123", "iloveyou12"} <= common
    assert len(common) > 1000 and all(len(p) >= MIN_PASSWORD for p in common)
    assert PASSWORD not in common
    # the UI's forms say the same length (the server checks it whatever they say)
    web = resources.files("tavernkit.server") / "web" / "account" / "password.js"
    assert f"export const MIN_PASSWORD = {MIN_PASSWORD};" in web.read_text("utf-8")


@pytest.mark.parametrize(
    ("password", "says"),
    [
        ("nine char", "at least 10 characters"),
        ("password123", "common passwords"),
        ("PassWord123", "common passwords"),  # whatever its case
        ("１２３４５６７８９０", "common passwords"),  # full-width digits: NFKC's 1234567890
    ],
)
async def test_a_short_or_common_password_is_refused_everywhere(
    users: Users, password: str, says: str
) -> None:
    r = await users.admin.post("/users", json={"name": "carol", "password": password})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "password" and says in r.json()["error"]["message"]
    ann_id = (await users.ann.get("/auth/me")).json()["user_id"]
    r = await users.admin.post(f"/users/{ann_id}/password", json={"password": password})
    assert r.status_code == 422 and r.json()["error"]["field"] == "password"
    body = {"old_password": PASSWORD, "new_password": password}
    r = await users.ann.post("/auth/password", json=body)
    assert r.status_code == 422 and r.json()["error"]["field"] == "new_password"
    assert says in r.json()["error"]["message"]
    # nothing changed
    assert (await _login(users, "ann")).status_code == 200
    assert "carol" not in [u["name"] for u in (await users.admin.get("/users")).json()]


# -- user names ----------------------------------------------------------------------------


async def test_user_names_are_nfkc_normalized_and_collide_as_such(users: Users) -> None:
    r = await users.admin.post("/users", json={"name": " ｃａｒｏｌ ", "password": PASSWORD})
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "carol"
    for same in ("carol", "CAROL", "ｃａｒｏｌ"):
        r = await users.admin.post("/users", json={"name": same, "password": PASSWORD})
        assert r.status_code == 409, same
    r = await users.admin.post("/users", json={"name": "ﬁona", "password": PASSWORD})
    assert r.json()["name"] == "fiona"
    # a login normalizes the same way
    assert (await _login(users, "ｃａｒｏｌ")).json()["name"] == "carol"
    assert (await _login(users, "fiona")).status_code == 200


@pytest.mark.parametrize(
    "name",
    [
        "ad\u200bmin",  # zero-width space
        "ann\u200d",  # zero-width joiner
        "\u202eadmin",  # right-to-left override
        "bob\u2066",  # left-to-right isolate
        "\ufeffbob",  # byte order mark
        "b\u00adob",  # soft hyphen
        "bo\x07b",  # a control character
        "bob\u3164",  # Hangul filler: shows nothing
        "\u2028",  # line separator
    ],
)
async def test_invisible_and_control_characters_are_refused_in_names(
    users: Users, name: str
) -> None:
    r = await users.admin.post("/users", json={"name": name, "password": PASSWORD})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == {
        "type": "FormatError",
        "message": r.json()["error"]["message"],
        "field": "name",
        "code": "invalid",
        "params": {"field": "name"},
    }
    r = await _login(users, name)
    assert r.status_code == 422 and r.json()["error"]["field"] == "name"
    names = [u["name"] for u in (await users.admin.get("/users")).json()]
    assert names == ["admin", "ann", "bob"]


# -- sessions ------------------------------------------------------------------------------


def _age_sessions(home: Path, user_id: str, days: float) -> None:
    """Make the user's sessions look ``days`` old (as if they began then)."""
    began = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    db = sqlite3.connect(home / DB_FILE_NAME)
    try:
        with db:
            db.execute("UPDATE sessions SET created = ? WHERE user_id = ?", (began, user_id))
    finally:
        db.close()


async def test_a_session_ends_thirty_days_after_it_began_however_busy(
    users: Users, tmp_path: Path
) -> None:
    assert users.server.state.settings.session_max_age_s == 30 * 24 * 3600.0
    async with users.server.client() as c:
        r = await c.post("/auth/login", json={"name": "ann", "password": PASSWORD})
        ann_id = r.json()["user_id"]
        assert (await c.get("/auth/me")).status_code == 200
        # used every day for 29 days: still signed in
        _age_sessions(tmp_path / "home", ann_id, 29)
        assert (await c.get("/auth/me")).status_code == 200
        # 30 days and a minute: over, though it was used a moment ago
        _age_sessions(tmp_path / "home", ann_id, 30.001)
        r = await c.get("/auth/me")
        assert r.status_code == 401 and r.json()["error"]["type"] == "NotAuthenticated"
        assert (await c.get("/auth/me")).status_code == 401
    # its row is gone; a new sign-in gets a new session
    db = sqlite3.connect(tmp_path / "home" / DB_FILE_NAME)
    try:
        left = db.execute("SELECT COUNT(*) FROM sessions WHERE user_id = ?", (ann_id,))
        assert left.fetchone()[0] == 0
    finally:
        db.close()
    assert (await _login(users, "ann")).status_code == 200


# -- deleting a user -----------------------------------------------------------------------


async def _give_records(client: httpx.AsyncClient, who: str) -> str:
    """One of each record a user makes over HTTP; the chat's id."""
    assert (await client.post("/import", files={"file": card_file("Mira")})).is_success
    image = io.BytesIO()
    Image.new("RGB", (8, 8), "grey").save(image, format="PNG")
    r = await client.put(
        "/characters/Mira/avatar",
        content=image.getvalue(),
        headers={"content-type": "image/png"},
    )
    assert r.status_code == 200, r.text
    chat = (await client.post("/chats", json={"character": "Mira"})).json()["id"]
    for message in (
        {"name": who, "text": f"the diary of {who}"},
        {"name": "Mira", "text": "a reply", "is_user": False},
    ):
        assert (await client.post(f"/chats/{chat}/messages", json=message)).status_code == 201
    profile = {
        "name": f"{who}'s profile",
        "base_url": "http://models.invalid/v1",  # never resolves: nothing is sent
        "model": "m",
        "keys": [f"sk-secret-of-{who}"],
    }
    assert (await client.post("/profiles", json=profile)).status_code == 201
    book = {"name": f"{who}'s book", "entries": {}}
    assert (await client.post("/lorebooks", json=book)).status_code == 201
    bind = {"scope": "character", "target": "Mira"}
    assert (await client.post(f"/lorebooks/{who}'s book/bindings", json=bind)).is_success
    persona = {"name": f"{who} the sailor", "description": "sails"}
    assert (await client.post("/personas", json=persona)).status_code == 201
    preset = {"name": f"{who}'s preset", "temperature": 0.5}
    assert (await client.post("/presets/chat", json=preset)).status_code == 201
    assert (await client.put("/variables/score", json={"value": 3})).is_success
    assert (await client.patch("/settings", json={"world_info": {"depth": 7}})).is_success
    assert (await client.post("/auth/tokens", json={"label": "bot"})).status_code == 201
    return str(chat)


def _rows_naming(home: Path, needles: list[str]) -> dict[str, int]:
    """Per table of the home's database (every one its catalog lists), the rows that name any
    of ``needles`` in any column."""
    db = sqlite3.connect(home / DB_FILE_NAME)
    try:
        tables = [
            str(r[0])
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        counts: dict[str, int] = {}
        for table in tables:
            found = 0
            for row in db.execute(f"SELECT * FROM {table}"):
                text = " ".join(
                    v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in row
                )
                found += any(n in text for n in needles)
            counts[table] = found
        return counts
    finally:
        db.close()


def _ids_of(home: Path, owner: str, user_id: str) -> list[str]:
    """The owner and user id, and the ids of every row that is theirs through them (records,
    chats, messages, API keys, tokens, sessions): what no row may name once they are gone."""
    db = sqlite3.connect(home / DB_FILE_NAME)
    try:
        queries = (
            ("SELECT id FROM records WHERE owner = ?", owner),
            ("SELECT id FROM chats WHERE owner = ?", owner),
            (
                "SELECT m.id FROM messages m JOIN chats c ON c.id = m.chat_id WHERE c.owner = ?",
                owner,
            ),
            ("SELECT id FROM api_keys WHERE owner = ?", owner),
            ("SELECT id FROM api_tokens WHERE user_id = ?", user_id),
            ("SELECT id FROM sessions WHERE user_id = ?", user_id),
        )
        ids = [str(r[0]) for sql, arg in queries for r in db.execute(sql, (arg,))]
    finally:
        db.close()
    return [owner, user_id, *ids]


def _sealed_secrets(home: Path) -> int:
    """How many key rows hold a sealed secret."""
    db = sqlite3.connect(home / DB_FILE_NAME)
    try:
        return int(db.execute("SELECT count(*) FROM api_keys WHERE secret <> ''").fetchone()[0])
    finally:
        db.close()


async def test_deleting_a_user_deletes_all_they_had(users: Users, tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = users.server.state.accounts.store
    chat = await _give_records(users.ann, "ann")
    await _give_records(users.bob, "bob")
    assert (await _login(users, "ann")).status_code == 200  # a browser session too
    ann, _ = await store.find_user("ann")
    bob, _ = await store.find_user("bob")
    needles = [*_ids_of(home, ann.owner, ann.id), "the diary of ann", "ann's"]
    assert chat in needles
    before = _rows_naming(home, needles)
    for table in ("records", "record_blobs", "record_links", "chats", "messages", "swipes"):
        assert before[table] > 0, table
    for table in ("api_keys", "api_tokens", "sessions"):
        assert before[table] > 0, table
    assert before["settings"] == before["global_variables"] == before["users"] == 1
    secrets_before = _sealed_secrets(home)
    bob_needles = _ids_of(home, bob.owner, bob.id)
    bob_before = _rows_naming(home, bob_needles)

    r = await users.admin.delete(f"/users/{ann.id}")
    assert r.status_code == 204, r.text

    assert {t: n for t, n in _rows_naming(home, needles).items() if n} == {}
    assert _sealed_secrets(home) == secrets_before - 1  # ann's key went with its row
    assert _rows_naming(home, bob_needles) == bob_before
    assert (await users.ann.get("/auth/me")).status_code == 401
    assert (await _login(users, "ann")).status_code == 401
    assert [c["name"] for c in (await users.bob.get("/characters")).json()["items"]] == ["Mira"]
    assert (await users.admin.delete(f"/users/{ann.id}")).status_code == 404


async def test_an_admin_hands_a_users_records_over(users: Users, tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = users.server.state.accounts.store
    bob_chat = await _give_records(users.bob, "bob")
    await users.ann.post("/import", files={"file": card_file("Mira")})
    ann, _ = await store.find_user("ann")
    bob, _ = await store.find_user("bob")
    before = _rows_naming(home, [bob.owner, bob.id])

    # ann has a character named Mira too: refused whole, nothing changes
    r = await users.admin.delete(f"/users/{bob.id}", params={"hand_over_to": ann.id})
    assert r.status_code == 409, r.text
    assert "character 'Mira'" in r.json()["error"]["message"]
    assert _rows_naming(home, [bob.owner, bob.id]) == before
    assert (await users.bob.get("/auth/me")).status_code == 200
    r = await users.admin.delete(f"/users/{bob.id}", params={"hand_over_to": "nobody"})
    assert r.status_code == 404
    r = await users.admin.delete(f"/users/{bob.id}", params={"hand_over_to": bob.id})
    assert r.status_code == 422 and r.json()["error"]["field"] == "hand_over_to"
    assert (await users.bob.get("/auth/me")).status_code == 200

    # to carol, who has none of those names: everything of bob's is hers
    made = await users.admin.post("/users", json={"name": "carol", "password": PASSWORD})
    carol_id = made.json()["id"]
    r = await users.admin.delete(f"/users/{bob.id}", params={"hand_over_to": carol_id})
    assert r.status_code == 204, r.text
    assert (await users.bob.get("/auth/me")).status_code == 401
    assert (await _login(users, "bob")).status_code == 401
    assert {t: n for t, n in _rows_naming(home, [bob.owner, bob.id]).items() if n} == {}
    async with users.server.client() as carol:
        r = await carol.post("/auth/login", json={"name": "carol", "password": PASSWORD})
        carol.headers["X-CSRF-Token"] = r.json()["csrf_token"]
        characters = (await carol.get("/characters")).json()["items"]
        assert [c["name"] for c in characters] == ["Mira"]
        chats = (await carol.get("/chats")).json()
        assert [c["id"] for c in chats["items"]] == [bob_chat]
        messages = (await carol.get(f"/chats/{bob_chat}/messages")).text
        assert "the diary of bob" in messages
        profiles = (await carol.get("/profiles")).json()
        assert [p["name"] for p in profiles] == ["bob's profile"] and profiles[0]["keys"]
        assert (await carol.get("/lorebooks/bob's book")).status_code == 200
        assert (await carol.get("/variables")).json() == {"score": 3}
