"""An example tavernkit plugin: one implementation of every public hook.

Published as the distribution ``tavernkit-example-plugin`` with the entry point
``example = "tavernkit_example_plugin"`` in the ``tavernkit`` group; tavernkit loads it with
every installed plugin (or alone, with ``TAVERNKIT_LOAD_PLUGINS=tavernkit-example-plugin``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import typer

from tavernkit.errors import FormatError
from tavernkit.models.lorebook import Lorebook, LoreEntry
from tavernkit.plugins import RegisterFormat, hookimpl
from tavernkit.providers.sources import ProviderSource
from tavernkit.text.macros.registry import MacroCall
from tavernkit.tools.registry import FunctionTool

NOTES_HEADER = b"#keyword-notes"


@hookimpl
def register_providers(register: Callable[[ProviderSource], None]) -> None:
    # An OpenAI-style chat API that authenticates with an ``x-api-key`` header.
    register(
        ProviderSource(
            "example-cloud",
            base_url="https://api.example-cloud.invalid/v1",
            auth="x-api-key",
            key_required=True,
        )
    )


def _shout(call: MacroCall) -> str:
    return call.arg(0).upper() + "!"


@hookimpl
def register_macros(register: Callable[..., object]) -> None:
    register("shout", _shout, args=1, description="The text upper-cased, with '!'")


def _wordcount(args: list[str], variables: Mapping[str, Any], configurable: Any) -> str:
    return str(sum(len(arg.split()) for arg in args))


@hookimpl
def register_template_functions(register: Callable[..., object]) -> None:
    register("wordcount", _wordcount)


def _count_letters(args: dict[str, Any]) -> str:
    text, letter = str(args["text"]), str(args["letter"]).lower()
    return str(text.lower().count(letter))


@hookimpl
def register_tools(register: Callable[[FunctionTool], None]) -> None:
    register(
        FunctionTool(
            "count_letters",
            description="How many times a letter occurs in a text (case-insensitive).",
            parameters={
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "letter": {"type": "string", "minLength": 1, "maxLength": 1},
                },
                "required": ["text", "letter"],
            },
            action=_count_letters,
        )
    )


def _is_notes(data: bytes) -> bool:
    return data.startswith(NOTES_HEADER)


def _read_notes(data: bytes, source: str) -> Lorebook:
    entries: dict[str, LoreEntry] = {}
    lines = data.decode("utf-8").splitlines()[1:]
    for number, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        keys, sep, content = line.partition(":")
        if not sep or not keys.strip():
            raise FormatError(f"line {number}: expected 'key, key: content'", source=source)
        uid = len(entries)
        entries[str(uid)] = LoreEntry(
            uid=uid, keys=[k.strip() for k in keys.split(",")], content=content.strip()
        )
    return Lorebook(entries=entries)


def _write_notes(book: Lorebook, **options: Any) -> bytes:
    lines = [", ".join(e.keys) + ": " + e.content for e in book.entries.values()]
    return b"\n".join([NOTES_HEADER, *(line.encode("utf-8") for line in lines)]) + b"\n"


@hookimpl
def register_formats(register: RegisterFormat) -> None:
    register("keyword-notes", _is_notes, _read_notes, _write_notes, kind="lorebook", priority=45)


def _hello(name: str) -> None:
    """Greet NAME from the example plugin."""
    typer.echo(f"hello {name}, from the example plugin")


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    cli.command("example-hello")(_hello)


@hookimpl
def register_routes(app: Any) -> None:
    # FastAPI is imported only here: the hook runs only inside ``tavernkit serve``.
    from fastapi import APIRouter

    router = APIRouter(prefix="/plugins/example")

    @router.get("/ping")
    async def ping() -> dict[str, str]:
        return {"plugin": "example", "reply": "pong"}

    app.include_router(router)
