"""Group files through the server's generic routes: imported by content, exported as
SillyTavern writes them."""

from __future__ import annotations

import json

from ._cards import card_file
from ._live import LiveServer

GROUP = {
    "id": "1700000000000",
    "name": "Harbour crew",
    "members": ["Mira.png", "Finn.png"],
    "avatar_url": "",
    "allow_self_responses": False,
    "activation_strategy": 1,
    "generation_mode": 0,
    "disabled_members": ["Finn.png"],
    "fav": False,
    "chat_id": "",
    "chats": [],
    "auto_mode_delay": 5,
    "generation_mode_join_prefix": "",
    "generation_mode_join_suffix": "",
}


async def test_a_group_file_imports_and_exports_unchanged(local: LiveServer) -> None:
    async with local.client() as c:
        for name in ("Mira", "Finn"):
            assert (await c.post("/import", files={"file": card_file(name)})).status_code == 201
        group = ("crew.json", json.dumps(GROUP, indent=4).encode(), "application/json")
        r = await c.post("/import", files={"file": group})
        assert r.status_code == 201, r.text
        assert [(i["kind"], i["name"], i["status"]) for i in r.json()] == [
            ("group", "Harbour crew", "imported")
        ]
        r = await c.get("/export/group/Harbour crew", params={"format": "json"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/json")
        assert r.content.decode() == json.dumps(GROUP, indent=4)
        r = await c.get("/export/group/Harbour crew", params={"format": "png"})
        assert r.status_code == 422  # a group is a JSON file only
