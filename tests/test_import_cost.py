"""``from tavernkit import Tavern`` is light (issue 40: it took 1.5 s, the floor of every CLI
command that opens a home): the facade imports the engine, the models, the store's drivers
and the HTTP client when a Tavern is made and opened, not when it is named. Checked in a fresh
interpreter (``sys.modules`` after the import), then that a Tavern still opens and works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: modules the import must not load: the server, the embedded model and embedder, images,
#: and the layers below the facade (pydantic and every model class, the drivers, httpx2)
HEAVY = (
    "fastapi",
    "uvicorn",
    "starlette",
    "xllamacpp",
    "onnxruntime",
    "tokenizers",
    "PIL",
    "pydantic",
    "httpx2",
    "asyncpg",
    "redis",
    "mcp",
    "tavernkit.models",
    "tavernkit.generation",
    "tavernkit.chat",
    "tavernkit.runtime",
    "tavernkit.store.sqlite",
    "tavernkit.store.postgres",
)


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.rstrip("\n")


def test_importing_the_facade_loads_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from tavernkit import Tavern\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    assert _fresh(code) == ""


def test_the_store_package_names_its_parts_without_loading_both_backends() -> None:
    code = (
        "import sys\n"
        "from tavernkit.store.paths import data_dir\n"
        "print(','.join(m for m in ('tavernkit.store.sqlite', 'tavernkit.store.postgres', "
        "'pydantic') if m in sys.modules))\n"
        "from tavernkit.store import SqliteStore, Store, open_store\n"
        "print(SqliteStore.__module__, Store.__module__, open_store.__module__)"
    )
    first, second = _fresh(code).splitlines()
    assert first == ""
    assert second == "tavernkit.store.sqlite tavernkit.store.protocol tavernkit.store.backends"


def test_a_tavern_named_lightly_still_opens_and_works(tmp_path: Path) -> None:
    code = (
        "import asyncio, sys\n"
        "from tavernkit import Tavern\n"
        "async def main():\n"
        f"    async with Tavern({str(tmp_path / 'home')!r}, load_plugins=False) as tk:\n"
        "        book = await tk.store.put('lorebook', {'entries': {}}, name='Coast')\n"
        "        print((await tk.store.get_record('lorebook', book.id)).info.name)\n"
        "        print(type(tk.chats).__name__, type(tk.library).__name__)\n"
        "asyncio.run(main())\n"
    )
    assert _fresh(code).splitlines() == ["Coast", "ChatService Library"]


def test_a_tavern_opened_without_a_plugin_command_loads_no_script_engine(tmp_path: Path) -> None:
    # STscript's parser, executor and ~200 built-in commands are for a script that runs (or a
    # plugin that adds a command), not for opening a home; reading Quick Reply sets through
    # the package's face stays light too
    code = (
        "import asyncio, sys\n"
        "from tavernkit import Tavern\n"
        "from tavernkit.stscript import SetLink\n"
        "async def main():\n"
        f"    async with Tavern({str(tmp_path / 'home')!r}, load_plugins=False):\n"
        "        pass\n"
        "asyncio.run(main())\n"
        "heavy = ('tavernkit.stscript.executor', 'tavernkit.stscript.commands', "
        "'tavernkit.stscript.parser', 'tavernkit.stscript.run')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
        "from tavernkit.stscript import run_script, default_registry\n"
        "print(run_script.__module__, 'getvar' in default_registry())\n"
    )
    assert _fresh(code).splitlines() == ["", "tavernkit.stscript.run True"]


def test_a_tavern_opened_loads_no_turn_engine_until_a_turn(tmp_path: Path) -> None:
    # the library names new chats with chat.greetings; opening a home for a command that
    # takes no turn (import, list, edit) does not import the chat service and the turn steps
    code = (
        "import asyncio, sys\n"
        "from tavernkit import Tavern\n"
        "async def main():\n"
        f"    async with Tavern({str(tmp_path / 'home')!r}, load_plugins=False) as tk:\n"
        "        heavy = ('tavernkit.chat.service', 'tavernkit.chat.prepare', "
        "'tavernkit.chat.run')\n"
        "        print(','.join(m for m in heavy if m in sys.modules))\n"
        "        print(type(tk.chats).__name__)\n"
        "asyncio.run(main())\n"
        "from tavernkit.chat import ChatService, TurnOutcome\n"
        "print(ChatService.__module__, TurnOutcome.__name__)\n"
    )
    assert _fresh(code).splitlines() == [
        "",
        "ChatService",
        "tavernkit.chat.service TurnOutcome",
    ]


def test_the_turn_engine_loads_jsonschema_only_when_a_schema_is_checked() -> None:
    # a plain reply checks no tool call and no structured output: the chat service and the
    # CLI's chat command import the tool checks' face, not jsonschema and its format checkers
    code = (
        "import sys\n"
        "import tavernkit.cli.chat, tavernkit.chat.service, tavernkit.tools\n"
        "print('jsonschema' in sys.modules)\n"
        "from tavernkit.tools import FunctionTool, ToolArgumentsError, validate_arguments\n"
        "tool = FunctionTool('roll', parameters={'type': 'object', "
        "'properties': {'sides': {'type': 'integer'}}, 'required': ['sides']})\n"
        "validate_arguments(tool, {'sides': 6})\n"
        "try:\n"
        "    validate_arguments(tool, {'sides': 'six'})\n"
        "except ToolArgumentsError as exc:\n"
        "    print([issue.path for issue in exc.issues])\n"
        "print('jsonschema' in sys.modules)\n"
    )
    assert _fresh(code).splitlines() == ["False", "['$.sides']", "True"]
