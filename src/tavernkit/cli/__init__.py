"""The ``tavernkit`` command line (typer + rich).

No business logic lives here: each command parses its arguments, makes one or two facade calls
and prints the outcome. Errors tavernkit raises on purpose print as one line on stderr with exit
code 1 (2 for usage errors, as typer does); anything else is a bug and keeps its traceback.

The built-in commands are registered by name (:data:`COMMANDS`) and their modules imported only
when one runs, so ``tavernkit --help`` (and a plugin's command) does not import the engines.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from tavernkit.cli.error_text import error_text
from tavernkit.cli.input_threads import input_still_blocked
from tavernkit.cli.language import say, set_language
from tavernkit.cli.lazy import LazyCommand, LazyGroup
from tavernkit.errors import TavernKitError
from tavernkit.plugins.manager import add_plugin_commands, get_plugin_manager

__all__ = ["COMMANDS", "app", "main"]

#: the built-in commands: name -> where it lives (module, attribute) and its one-line help
#: (checked against the loaded command by the tests)
COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand(
        "chat",
        "tavernkit.cli.chat",
        "chat_command",
        "Chat with a character (the embedded model and the demo character by default).",
    ),
    LazyCommand(
        "prompt",
        "tavernkit.cli.prompt_cmd",
        "prompt_command",
        "Show the exact request the next turn would send, block by block.",
    ),
    LazyCommand(
        "import",
        "tavernkit.cli.records",
        "import_",
        "Import files; the format is recognised by content, not by extension.",
    ),
    LazyCommand("list", "tavernkit.cli.records", "list_", "List stored records."),
    LazyCommand(
        "show",
        "tavernkit.cli.records",
        "show",
        "Show a character, lorebook, preset, template, persona or chat.",
    ),
    LazyCommand(
        "export", "tavernkit.cli.records", "export", "Export a record in SillyTavern's formats."
    ),
    LazyCommand(
        "preset",
        "tavernkit.cli.preset",
        "preset_app",
        "Show and edit a chat-completion preset's prompts (SillyTavern's prompt manager).",
    ),
    LazyCommand(
        "model",
        "tavernkit.cli.model",
        "model_app",
        "The embedded offline model (SmolLM2-135M-Instruct).",
    ),
    LazyCommand("card", "tavernkit.cli.card_edit", "card_app", "Work on stored character cards."),
    LazyCommand(
        "profile",
        "tavernkit.cli.profile",
        "profile_app",
        "Connection profiles (where replies come from).",
    ),
    LazyCommand("lore", "tavernkit.cli.lore", "lore_app", "Lorebook tools."),
    LazyCommand("persona", "tavernkit.cli.manage", "persona_app", "Personas: who you speak as."),
    LazyCommand(
        "chats", "tavernkit.cli.manage", "chats_app", "Chats: list, rename, delete, search."
    ),
    LazyCommand(
        "character",
        "tavernkit.cli.manage",
        "character_app",
        "Characters: rename, duplicate, delete, lorebooks.",
    ),
    LazyCommand(
        "group",
        "tavernkit.cli.group_cmd",
        "group_app",
        "Groups: members, mutes and reply strategy (chat with one: chat --group).",
    ),
    LazyCommand(
        "memory",
        "tavernkit.cli.memory_cmd",
        "memory_app",
        "Memory: vectorized entries, chat memory and the rolling summary.",
    ),
    LazyCommand(
        "settings",
        "tavernkit.cli.settings_cmd",
        "settings_app",
        "Settings: world info, prompt and reasoning, and the compatibility mode.",
    ),
    LazyCommand(
        "regex",
        "tavernkit.cli.regex_cmd",
        "regex_app",
        "Regex scripts: find/replace rules on input, replies, world info and reasoning.",
    ),
    LazyCommand(
        "mcp",
        "tavernkit.cli.mcp",
        "mcp_app",
        "MCP servers: tools for chats, or the review's prose linter.",
    ),
    LazyCommand(
        "serve",
        "tavernkit.cli.serve",
        "serve_command",
        "Serve the HTTP API (local user on 127.0.0.1; accounts for anything else).",
    ),
    LazyCommand(
        "migrate",
        "tavernkit.cli.data",
        "migrate",
        "Create or update a database's tables (the server and the CLI also do it on open).",
    ),
    LazyCommand(
        "copy-data",
        "tavernkit.cli.data",
        "copy_data",
        "Copy everything between the home's SQLite file and an empty PostgreSQL database.",
    ),
    LazyCommand(
        "rotate-secret-key",
        "tavernkit.cli.data",
        "rotate_secret_key",
        "Seal the stored API keys under a new secret key.",
    ),
    LazyCommand(
        "backup",
        "tavernkit.cli.backup_cmd",
        "backup_app",
        "Back the home's data up (verified), check backups, keep the newest N.",
    ),
    LazyCommand(
        "restore",
        "tavernkit.cli.backup_cmd",
        "restore_command",
        "Restore a backup into an empty home (or an empty PostgreSQL database).",
    ),
)

app = typer.Typer(
    name="tavernkit",
    help="Character chat with LLMs, compatible with SillyTavern's cards, lorebooks and presets.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyGroup.with_commands(COMMANDS),
)


@app.callback()
def _root(
    lang: Annotated[
        str | None,
        typer.Option("--lang", help="Messages in en, zh-Hans or zh-Hant (default: the locale's)."),
    ] = None,
) -> None:
    # a group of commands, not one: typer needs a callback when every command is a stand-in
    try:
        set_language(lang)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--lang") from None


err = Console(stderr=True, highlight=False, soft_wrap=True)


def main() -> None:
    """The console-script entry point: built-in commands plus plugins' commands.

    The only place that may end the interpreter without finalizing it: when a command leaves an
    input thread blocked in ``input()`` (a chat ended by Ctrl-C), finalizing would abort on
    stdin's lock, so the process ends at once with the command's status. Everything the command
    wrote is closed by then (its Tavern closes before it returns)."""
    code: int | str | None = 0
    try:
        try:
            # the built-in plugin adds formats, not commands: leaving it out keeps the formats
            # (and the models under them) unimported until a command needs them
            add_plugin_commands(get_plugin_manager(include_builtins=False), app)
        except TavernKitError as exc:
            err.print(f"[bold red]{say('error:')}[/] {escape(error_text(exc))}")
            sys.exit(1)
        app()
    except SystemExit as exc:
        code = exc.code
        raise
    finally:
        if input_still_blocked():
            _end_process_now(code)


def _end_process_now(code: int | str | None) -> NoReturn:
    if isinstance(code, str):
        print(code, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))
