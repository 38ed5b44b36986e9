"""The web UI: its static files (``/`` and ``/ui/<file>``, shipped in the package under
``server/web``) and the routes only the UI needs: the prompt inspector of a chat's next turn,
the chat's author's note (a ``chat_metadata`` write), a lorebook's "test this text" and a
connection profile's "test connection".

Every page and script is sent with a Content-Security-Policy that allows only this origin's
scripts (no inline script, no ``eval``): the UI never turns text into HTML, and this is the
second wall should anything try."""

from __future__ import annotations

import functools
import random
from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from starlette.responses import Response

from tavernkit import demo
from tavernkit.chat.inspect import inspection
from tavernkit.chat.lore_test import lore_book, lore_rows, scan_lore_text
from tavernkit.errors import EgressRefused, GenerateTaskError, NotFound
from tavernkit.models.preset import DEFAULT_PROMPT_ORDER, DEFAULT_PROMPTS, ChatCompletionPreset
from tavernkit.models.samplers import TextGenSettings
from tavernkit.server.auth import UserTavern
from tavernkit.server.routes._common import ModelCall
from tavernkit.server.task_errors import safe_message
from tavernkit.text.tokens import ByteEstimateTokenizer

__all__ = ["CONTENT_SECURITY_POLICY", "router"]

router = APIRouter(tags=["ui"])

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)

#: file suffix -> media type of what the UI ships
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".webmanifest": "application/manifest+json",
}

_WEB = resources.files("tavernkit.server") / "web"


def _plain_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


def _asset(name: str, folder: str = "") -> Response:
    suffix = name[name.rfind(".") :] if "." in name else ""
    # Only plain names of files that exist in the web folder or one folder of it (a screen's
    # components): no path, no traversal.
    if not _plain_name(name) or (folder and not _plain_name(folder)) or suffix not in _MEDIA_TYPES:
        raise NotFound(f"no UI file {name!r}")
    file = (_WEB / folder / name) if folder else (_WEB / name)
    if not file.is_file():
        raise NotFound(f"no UI file {name!r}")
    return Response(
        file.read_bytes(),
        media_type=_MEDIA_TYPES[suffix],
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache",
        },
    )


@router.get("/", response_class=Response, include_in_schema=False)
async def index() -> Response:
    """The UI's one page (its screens are ``#/...`` routes of ``app.js``)."""
    return _asset("index.html")


@router.get("/sw.js", response_class=Response, include_in_schema=False)
async def service_worker() -> Response:
    """The service worker (``web/sw.js``), at the root so its scope is the whole UI: it caches
    the shell listed by :func:`shell_files`, never API data."""
    return _asset("sw.js")


@router.get("/shell.json", include_in_schema=False)
async def shell_files() -> dict[str, list[str]]:
    """The UI's shell, the files the service worker caches: the page and every static file."""
    return {"files": _shell()}


@functools.cache
def _shell() -> list[str]:
    files = ["/"]
    for entry in sorted(_WEB.iterdir(), key=lambda e: e.name):
        inner = sorted(entry.iterdir(), key=lambda e: e.name) if entry.is_dir() else [entry]
        for file in inner:
            served = _plain_name(file.name) and file.name[file.name.rfind(".") :] in _MEDIA_TYPES
            if file.is_file() and served and file.name not in _NOT_SHELL:
                files.append(
                    f"/ui/{entry.name}/{file.name}" if entry.is_dir() else f"/ui/{file.name}"
                )
    return files


#: web files that are not the page's: the page itself (cached as ``/``), the worker
_NOT_SHELL = frozenset({"index.html", "sw.js"})


@router.get("/ui/{name}", response_class=Response, include_in_schema=False)
async def asset(name: str) -> Response:
    return _asset(name)


@router.get("/ui/{folder}/{name}", response_class=Response, include_in_schema=False)
async def folder_asset(folder: str, name: str) -> Response:
    return _asset(name, folder)


TurnKind = Literal["normal", "swipe", "regenerate", "continue", "impersonate"]


@router.get("/ui/chats/{chat_id}/inspect")
async def inspect_next_turn(
    chat_id: str,
    tk: UserTavern,
    kind: Annotated[TurnKind, Query()] = "normal",
    persona: Annotated[
        str | None, Query(max_length=200, description="speak as this persona (the UI's pick)")
    ] = None,
) -> dict[str, Any]:
    """The exact request the chat's next turn of ``kind`` would send (a dry run: nothing is
    stored), block by block with sources and token counts, and the lorebook entries that fire
    and why (what ``tavernkit prompt --format json`` prints). ``persona`` is the per-turn
    choice a turn would carry (the chat screen's persona picker)."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    overrides = {"persona": persona} if persona else None
    await tk.chats.check_overrides(overrides)
    return inspection(await tk.chats.preview(info.id, kind=kind, overrides=overrides))


class AuthorsNoteBody(BaseModel):
    """SillyTavern's author's note of one chat (``chat_metadata.note_*``)."""

    text: str = Field("", max_length=100_000)
    #: 0 after the story string, 1 in chat at ``depth``, 2 before the story string
    position: Literal[0, 1, 2] = 1
    depth: int = Field(4, ge=0, le=10_000)
    #: insert every N user messages (0: never)
    interval: int = Field(1, ge=0, le=10_000)
    role: Literal[0, 1, 2] = 0


@router.get("/ui/chats/{chat_id}/authors-note")
async def get_authors_note(chat_id: str, tk: UserTavern) -> AuthorsNoteBody:
    window = await tk.store.load_chat_window(chat_id, last=1, owner=tk.owner)
    meta = window.header.get("chat_metadata") or {}
    return AuthorsNoteBody(
        text=str(meta.get("note_prompt") or ""),
        position=meta.get("note_position", 1),
        depth=meta.get("note_depth", 4),
        interval=meta.get("note_interval", 1),
        role=meta.get("note_role", 0),
    )


@router.put("/ui/chats/{chat_id}/authors-note")
async def put_authors_note(chat_id: str, body: AuthorsNoteBody, tk: UserTavern) -> AuthorsNoteBody:
    """Store the chat's author's note (one header write; the other metadata is kept)."""
    window = await tk.store.load_chat_window(chat_id, last=1, owner=tk.owner)
    meta = dict(window.header.get("chat_metadata") or {})
    meta.update(
        note_prompt=body.text,
        note_position=body.position,
        note_depth=body.depth,
        note_interval=body.interval,
        note_role=body.role,
    )
    await tk.store.update_chat_metadata(window.info.id, meta, owner=tk.owner)
    return body


class LoreTest(BaseModel):
    text: str = Field(max_length=200_000)
    kind: TurnKind = "normal"
    #: seeds the probability and group rolls (random when absent)
    seed: int | None = None


@router.post("/ui/lorebooks/{ref}/test")
async def test_lorebook(ref: str, body: LoreTest, tk: UserTavern) -> list[dict[str, Any]]:
    """Every entry of the lorebook scanned against ``text`` as a chat's one message: whether
    it fires and why, its position and tokens (a dry run; what ``tavernkit lore test --text``
    prints)."""
    name, lorebook = await lore_book(tk.store, tk.owner, ref)
    rng = random.Random(body.seed).random
    result = scan_lore_text(await tk.settings(), name, lorebook, body.text, body.kind, rng)
    return lore_rows(result, ByteEstimateTokenizer().count)


class ConnectionCheck(BaseModel):
    ok: bool
    #: the reply's first characters when it worked
    text: str = ""
    #: the error code when it did not (``generate_task``'s codes: auth, rate_limit, timeout...)
    code: str | None = None
    message: str | None = None


@router.post("/ui/profiles/{name}/test")
async def test_connection(name: str, tk: UserTavern, caller: ModelCall) -> ConnectionCheck:
    """One tiny request through the profile itself (its keys, URL and model; not its
    fallback chain, nor the server's shared route, whose answer would say nothing of this
    profile): ``ok`` with the reply's start, or the typed error's code and a message naming
    its class and HTTP status (never the upstream's text or a key). A destination the egress
    policy refuses is a 403. Counted against the caller's ``turn_rate`` like a turn."""
    await tk.profiles.get(name)  # NotFound for an unknown profile
    try:
        result = await tk.context(fallbacks=False).generate_task(
            [{"role": "user", "content": "Reply with the single word: OK"}],
            include_character_card=False,
            api_preset_name=name,
        )
    except GenerateTaskError as exc:
        cause = exc.cause if exc.cause is not None else exc.__cause__
        if isinstance(cause, EgressRefused):
            raise cause from None
        return ConnectionCheck(ok=False, code=exc.code, message=safe_message(exc))
    return ConnectionCheck(ok=True, text=result.assistant_text[:200])


@router.get("/ui/presets/chat/defaults")
async def default_prompts() -> dict[str, Any]:
    """SillyTavern's default prompts and their order: what a chat preset without its own
    ``prompts`` / ``prompt_order`` runs with, for the prompt manager to start from; and the
    samplers a preset that leaves one out runs with."""
    defaults = ChatCompletionPreset().model_dump(mode="json")
    return {
        "prompts": [dict(p) for p in DEFAULT_PROMPTS],
        "order": [{"identifier": i, "enabled": on} for i, on in DEFAULT_PROMPT_ORDER],
        "samplers": {key: defaults[key] for key in _CHAT_SAMPLERS},
    }


#: the samplers of a chat-completion preset (what the chat screen's panel edits)
_CHAT_SAMPLERS = (
    "temperature",
    "top_p",
    "top_k",
    "top_a",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "seed",
    "openai_max_tokens",
    "openai_max_context",
)


@router.get("/ui/presets/textgen/defaults")
async def default_samplers() -> dict[str, Any]:
    """A text-completion preset's samplers as SillyTavern's defaults set them: what a preset
    that leaves a key out runs with, for the editor to show."""
    return TextGenSettings().model_dump(mode="json")


class DemoCharacter(BaseModel):
    id: str
    name: str


@router.post("/ui/demo-character", status_code=201)
async def add_demo_character(tk: UserTavern) -> DemoCharacter:
    """Import the bundled demo card (Wren, the lighthouse keeper, what ``tavernkit chat``
    starts with), unchanged when it is already there."""
    card = await demo.add_demo_character(tk)
    return DemoCharacter(id=card.id, name=card.name)
