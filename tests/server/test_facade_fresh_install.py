"""A first user of the facade: on a fresh home, ``tavernkit serve`` lists the demo character
and the embedded model at ``/v1/models``, and the README's ``openai`` example answers as it is
written (its address aside), on the embedded offline model. The demo character comes on the
first start only, into an empty library."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from pathlib import Path

import pytest

from tavernkit.demo import add_demo_on_first_start
from tavernkit.facade import Tavern
from tavernkit.providers.local_engine import local_model_missing

from ._live import live_server
from ._processes import start_serve
from .conftest import settings

README = Path(__file__).resolve().parents[2] / "README.md"
#: the address the README's example talks to (``tavernkit serve``'s default)
README_URL = "http://127.0.0.1:8000/v1"


def _readme_example() -> str:
    """The README's facade example: the ``python`` block that imports ``openai``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    (example,) = [b for b in blocks if "from openai import OpenAI" in b]
    assert README_URL in example
    return example


async def test_the_readme_openai_example_answers_on_a_fresh_home(tmp_path: Path) -> None:
    missing = local_model_missing()
    if missing is not None:
        pytest.skip(missing)
    served = await start_serve(tmp_path / "fresh-home", env={})
    try:
        async with served.client() as client:
            listed = (await client.get("/v1/models")).json()["data"]
        assert [m["id"] for m in listed] == ["character/Wren", "profile/embedded"]
        code = _readme_example().replace(README_URL, served.url + "/v1")
        run = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(run.communicate(), 240)
    finally:
        await served.stop()
    assert run.returncode == 0, err.decode()[-2000:]
    assert out.decode().strip()  # Wren said something


async def _character_names(home: Path) -> list[str]:
    """The characters a server with ``demo_on_first_start`` (as ``tavernkit serve``) lists."""
    async with live_server(settings(home, demo_on_first_start=True)) as server:
        tk = server.state.tavern
        return [info.name for info in await tk.store.list("character", owner=tk.owner)]


async def test_the_demo_character_comes_on_the_first_start_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert await _character_names(home) == ["Wren"]
    async with (
        live_server(settings(home, demo_on_first_start=True)) as server,
        server.client() as client,
    ):
        assert (await client.delete("/characters/Wren")).status_code == 204
    # a user who deleted it does not find it back after a restart
    assert await _character_names(home) == []


async def test_a_library_with_characters_gets_no_demo(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with live_server(settings(home)) as server:  # not a serve: no demo
        tk = server.state.tavern
        card = b'{"name": "Ivo", "description": "A ferryman.", "first_mes": "Aboard."}'
        await tk.library.import_bytes(card, source="ivo.json")
    assert await _character_names(home) == ["Ivo"]


async def test_processes_starting_at_once_on_a_new_database_all_start(
    tmp_path: Path, postgres_url: str
) -> None:
    """Three processes' first starts on one new PostgreSQL database at once (a deployment's
    first ``compose up``): each finds the library empty, one adds Wren and every start goes
    on (before, a process whose import met the name taken failed to start: seen in CI)."""
    async with Tavern(tmp_path / "setup", database=postgres_url):
        pass  # the tables exist, as the processes' own migrations would leave them
    async with contextlib.AsyncExitStack() as stack:
        taverns = [
            await stack.enter_async_context(Tavern(tmp_path / f"home-{n}", database=postgres_url))
            for n in range(3)
        ]
        added = await asyncio.gather(*(add_demo_on_first_start(tk) for tk in taverns))
        names = [i.name for i in await taverns[0].store.list("character", owner=taverns[0].owner)]
    assert names == ["Wren"]
    assert any(result is not None for result in added)
