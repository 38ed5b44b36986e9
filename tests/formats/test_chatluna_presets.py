"""ChatLuna presets: real presets from ChatLunaLab/chatluna (tests/fixtures/chatluna, see its
MANIFEST) imported into records and rendered in ChatLuna's dialect; a preset with world lore
and an author's note (written here: no licensed public one has them) imported as a preset
and a lorebook; bad presets as typed errors that write nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tavernkit.errors import FormatError
from tavernkit.facade import Tavern
from tavernkit.models.chatluna import ChatLunaPreset
from tavernkit.models.lorebook import Lorebook, WorldInfoPosition
from tavernkit.text.macros.env import MacroEnv
from tavernkit.text.render import RenderOptions

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chatluna"
OPTIONS = RenderOptions(env=MacroEnv(clock=lambda: datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)))

LORE_PRESET = """\
keywords:
  - harbour
  - 港口
prompts:
  - role: system
    type: description
    content: "{name} keeps the harbour. {if is_group}Many are listening.{else}One listens.{/if}"
  - role: assistant
    type: first_message
    content:
      - type: text
        text: "Welcome, {user}."
      - type: image_url
        image_url: https://example.org/harbour.png
format_user_prompt: "{sender}({sender_id}): {prompt}"
world_lores:
  - scanDepth: 2
    tokenLimit: 1050
    insertPosition: after_char_defs
  - keywords: [ferry, boat]
    content: The ferry leaves at dusk.
    order: 10
  - keywords: toll
    content: Two coins.
    constant: true
    enabled: false
    insertPosition: before_example_messages
    caseSensitive: true
authors_note:
  content: Keep it short.
  insertDepth: 2
  insertFrequency: 3
"""


async def test_a_real_preset_imports_and_renders_as_chatluna_would(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        (result,) = await tk.library.import_file(FIXTURES / "catgirl.yml")
        preset = await tk.store.get("chatluna_preset", "catgirl", owner=tk.owner)
        assert isinstance(preset, ChatLunaPreset)
        rendered = await tk.prompt_renderer.render_chatluna_preset(
            preset, {"name": "Mimi"}, OPTIONS
        )
        user = await tk.prompt_renderer.format_chatluna_input(
            preset, "摸摸头", {"sender": "Ada"}, OPTIONS
        )
    assert (result.kind, result.name, result.status) == ("chatluna_preset", "catgirl", "imported")
    assert preset.keywords == ["猫娘", "catgirl"]
    system, assistant = rendered.messages
    assert system["role"] == "system" and assistant == {
        "role": "assistant",
        "content": "喵~你好主人",
    }
    assert "你的名字：Mimi。" in system["content"] and "{name}" not in system["content"]
    assert "请以Mimi的人设" in system["content"]
    assert rendered.variables == ["name"] and rendered.identifiers == ["0", "1"]
    assert user.text == "用户Ada说: 摸摸头"


async def test_the_tavern_has_chatlunas_renderer_service(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        await tk.library.import_file(FIXTURES / "catgirl.yml")
        preset = await tk.store.get("chatluna_preset", "catgirl", owner=tk.owner)
        assert isinstance(preset, ChatLunaPreset)
        service = tk.chatluna_renderer
        service.set_variable("name", "Mimi")
        rendered = await service.render_preset_template(preset)
        hello = await service.render_template("{name}: {upper(name)}", {"name": "ada"})
    system, assistant = rendered.messages
    assert system["type"] == "system" and "你的名字：Mimi。" in system["content"]
    assert assistant == {"type": "ai", "content": "喵~你好主人", "additional_kwargs": {}}
    assert rendered.variables == ["name"]
    # no upper() registered: that tag renders empty, as in ChatLuna
    assert (hello.text, hello.variables) == ("ada: ", ["name"])


async def test_a_bare_name_is_the_variable_else_the_function(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        await tk.library.import_file(FIXTURES / "chatgpt.yml")
        preset = await tk.store.get("chatluna_preset", "chatgpt", owner=tk.owner)
        assert isinstance(preset, ChatLunaPreset)
        renderer = tk.prompt_renderer
        by_function = await renderer.render_chatluna_preset(preset, {}, OPTIONS)
        # ChatLuna's own system variables set date to toLocaleString(): the variable wins
        by_variable = await renderer.render_chatluna_preset(
            preset, {"date": "5/6/2024, 7:08:09 AM"}, OPTIONS
        )
        # the default format of a preset without one
        plain = await renderer.format_chatluna_input(preset, "hi", {}, OPTIONS)
    assert "Current date: 2024-05-06\n" in by_function.messages[0]["content"]
    assert "Current date: 5/6/2024, 7:08:09 AM\n" in by_variable.messages[0]["content"]
    assert preset.config == {
        "postHandler": {"censor": False, "prefix": "<output>", "postfix": "</output>"}
    }
    assert plain.text == "hi"


async def test_world_lore_and_authors_note_become_records(tmp_path: Path) -> None:
    source = tmp_path / "harbour.yml"
    source.write_text(LORE_PRESET, encoding="utf-8")
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        results = await tk.library.import_file(source)
        preset = await tk.store.get("chatluna_preset", "harbour", owner=tk.owner)
        book = await tk.store.get("lorebook", "harbour", owner=tk.owner)
        assert isinstance(preset, ChatLunaPreset)
        rendered = await tk.prompt_renderer.render_chatluna_preset(
            preset, {"name": "Mira", "user": "Ada", "is_group": False}, OPTIONS
        )
        user = await tk.prompt_renderer.format_chatluna_input(
            preset, "Any boats?", {"sender": "Ada", "sender_id": "42"}, OPTIONS
        )
        again = await tk.library.import_file(source)
    assert [(r.kind, r.name) for r in results] == [
        ("chatluna_preset", "harbour"),
        ("lorebook", "harbour"),
    ]
    assert [r.status for r in again] == ["unchanged", "unchanged"]
    note = preset.note
    assert note is not None
    assert (note.content, note.insertPosition, note.insertDepth, note.insertFrequency) == (
        "Keep it short.",
        "in_chat",
        2,
        3,
    )
    system, first = rendered.messages
    assert system["content"] == "Mira keeps the harbour. One listens."
    assert first["content"][0] == {"type": "text", "text": "Welcome, Ada."}
    assert first["content"][1]["type"] == "image_url"  # other parts pass through
    assert rendered.identifiers == ["description", "first_message"]
    assert user.text == "Ada(42): Any boats?"
    assert isinstance(book, Lorebook)
    ferry, toll = book.entries.values()
    assert (ferry.keys, ferry.content, ferry.order, ferry.disable) == (
        ["ferry", "boat"],
        "The ferry leaves at dusk.",
        10,
        False,
    )
    assert ferry.position == WorldInfoPosition.AFTER  # the defaults item's position
    assert (toll.keys, toll.constant, toll.disable, toll.case_sensitive) == (
        ["toll"],
        True,
        True,
        True,
    )
    assert toll.position == WorldInfoPosition.EM_TOP
    assert book.extensions["chatluna"] == {
        "scanDepth": 2,
        "tokenLimit": 1050,
        "insertPosition": "after_char_defs",
    }


async def test_a_preset_exports_and_reads_back(tmp_path: Path) -> None:
    async with Tavern(tmp_path, load_plugins=False) as tk:
        (imported,) = await tk.library.import_file(FIXTURES / "catgirl.yml")
        preset = await tk.store.get("chatluna_preset", "catgirl", owner=tk.owner)
        handler = tk.formats.get("chatluna-preset")
        assert handler.write is not None
        data = handler.write(preset)
        back = handler.read(data, "catgirl.yml")
    assert imported.status == "imported"
    assert back.model_dump() == preset.model_dump()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("keywords: []\nprompts: []\n", "keywords"),
        ("keywords: [a]\nprompts:\n  - role: narrator\n    content: x\n", "prompts.0.role"),
        (
            "keywords: [a]\nprompts: []\nauthors_note: {content: x}\nauthor_notes: {content: y}\n",
            "both authors_note and author_notes",
        ),
        ("keywords: [a]\nprompts: []\nworld_lores:\n  - keywords: [k]\n", "keywords and content"),
        ("keywords: [a]\nprompts: [\n", "not valid YAML"),
    ],
)
async def test_bad_presets_are_format_errors_and_write_nothing(
    tmp_path: Path, text: str, match: str
) -> None:
    source = tmp_path / "bad.yml"
    source.write_text(text, encoding="utf-8")
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        with pytest.raises(FormatError, match=match):
            if "prompts: [\n" in text:  # not YAML at all: read it as the preset format
                tk.formats.get("chatluna-preset").read(source.read_bytes(), str(source))
            else:
                await tk.library.import_file(source)
        assert await tk.store.list("chatluna_preset", owner=tk.owner) == []
        assert await tk.store.list("lorebook", owner=tk.owner) == []


def test_yaml_cards_are_not_taken_for_presets() -> None:
    from tavernkit.formats.chatluna import is_chatluna_preset

    assert not is_chatluna_preset(b"name: Mira\ngreeting: Hello\ncontext: A keeper\n")
    assert not is_chatluna_preset(b'{"keywords": ["a"], "prompts": []}')
    assert is_chatluna_preset((FIXTURES / "catgirl.yml").read_bytes())


def test_the_cli_imports_lists_shows_and_exports_a_preset(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tavernkit.cli import app

    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    assert "imported chatluna_preset catgirl" in run("import", str(FIXTURES / "catgirl.yml"))
    assert "catgirl chatluna_preset" in run("list", "presets")
    assert "用户{sender}说: {prompt}" in run("show", "catgirl")
    out = tmp_path / "catgirl.yml"
    run("export", "catgirl", "-f", "yaml", "-o", str(out))
    assert "unchanged chatluna_preset catgirl" in run("import", str(out))


async def test_the_server_imports_and_exports_a_preset(tmp_path: Path) -> None:
    from server._live import live_server
    from tavernkit.server.settings import ServerSettings

    data = (FIXTURES / "catgirl.yml").read_bytes()
    async with (
        live_server(ServerSettings(home=tmp_path / "home")) as server,
        server.client() as c,
    ):
        first = await c.post("/import", files={"file": ("catgirl.yml", data)})
        exported = await c.get("/export/chatluna_preset/catgirl", params={"format": "yaml"})
        again = await c.post("/import", files={"file": ("catgirl.yml", exported.content)})
    assert first.status_code == 201 and first.json()[0]["kind"] == "chatluna_preset"
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/yaml")
    assert again.json()[0]["status"] == "unchanged"
