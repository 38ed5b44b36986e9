"""Regex scripts (:mod:`tavernkit.regex_admin`): the caller's global list, the allow lists of
cards and presets, import, export and the editor's test box.

- ``GET /regex``: the extension's switch, the global scripts in run order, the allowed
  characters and presets; ``PUT /regex/enabled`` ``{"enabled"}`` turns every script off/on.
- ``POST /regex/scripts``: a new global script (a script object with an ``id`` is kept as
  it is; without one it is the editor's form, its defaults filling the rest), at the end or
  at ``?position=``; ``GET``, ``PATCH`` (the fields given, SillyTavern's names) and
  ``DELETE /regex/scripts/{ref}`` (id, else name); ``PUT /regex/scripts/{ref}/position``
  ``{"position"}`` reorders; ``PUT /regex/scripts/{ref}/enabled`` ``{"enabled"}``.
- ``POST /regex/import``: a script object or a list (SillyTavern's export file), appended
  with fresh ids; a file without ``scriptName`` is 422 ("Invalid regex object.").
- ``GET /regex/export`` (every global script) and ``GET /regex/scripts/{ref}/export``: the
  file SillyTavern's export button writes, as a download.
- ``GET /regex/characters/{ref}``: a card's embedded scripts and whether they run;
  ``PUT /regex/characters/{ref}/allowed`` ``{"allowed"}`` (SillyTavern's "allow embedded
  scripts" popup); ``PUT /regex/presets/{ref}/allowed`` ``{"allowed"}`` the same for a chat
  preset's.
- ``POST /regex/test`` ``{"script", "text"}``: the text through that one script, whatever its
  placement (the editor's live test box; no macros are expanded).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Body, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.models.regex_script import ALLOW_QUESTION, RegexScript
from tavernkit.regex_admin import CardScripts, RegexAdmin
from tavernkit.server.auth import UserTavern

__all__ = ["router"]

router = APIRouter(prefix="/regex", tags=["regex"])

ScriptJson = Annotated[
    dict[str, Any], Body(description="a regex script, as SillyTavern names its fields")
]


def _admin(tk: UserTavern) -> RegexAdmin:
    return RegexAdmin(tk.store, tk.owner)


def _wire(script: RegexScript) -> dict[str, Any]:
    return script.to_wire()


class RegexState(BaseModel):
    enabled: bool
    #: the global scripts in run order (SillyTavern's JSON)
    scripts: list[dict[str, Any]]
    #: character ids whose card scripts run
    allowed_characters: list[str]
    #: chat preset ids whose scripts run
    allowed_presets: list[str]


class Enabled(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool


class Allowed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    allowed: bool


class Position(BaseModel):
    model_config = ConfigDict(extra="forbid")
    position: int = Field(ge=0)


class CharacterScripts(BaseModel):
    character_id: str
    name: str
    scripts: list[dict[str, Any]]
    allowed: bool
    #: what to ask before allowing them (SillyTavern's popup)
    question: str = ALLOW_QUESTION

    @classmethod
    def of(cls, found: CardScripts) -> CharacterScripts:
        return cls(
            character_id=found.character_id,
            name=found.name,
            scripts=[s.to_wire() for s in found.scripts],
            allowed=found.allowed,
        )


class TestBox(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: the script as edited (SillyTavern's JSON, or the editor's form)
    script: dict[str, Any]
    text: str = Field(max_length=200_000)


class TestOutput(BaseModel):
    output: str
    #: whether the find pattern compiles (a pattern that does not is a no-op)
    valid: bool


@router.get("")
async def regex_state(tk: UserTavern) -> RegexState:
    settings = await _admin(tk).settings()
    return RegexState(
        enabled=settings.enabled,
        scripts=[_wire(s) for s in settings.scripts],
        allowed_characters=list(settings.allowed_characters),
        allowed_presets=list(settings.allowed_presets),
    )


@router.put("/enabled")
async def set_regex_enabled(body: Enabled, tk: UserTavern) -> RegexState:
    """Turn every regex script off (SillyTavern's disabled extension) or on again."""
    await _admin(tk).set_extension_enabled(body.enabled)
    return await regex_state(tk)


@router.post("/scripts", status_code=201)
async def add_regex_script(
    body: ScriptJson,
    tk: UserTavern,
    position: Annotated[int | None, Query(ge=0)] = None,
) -> dict[str, Any]:
    return _wire(await _admin(tk).add(body, position=position))


@router.get("/scripts/{ref}")
async def get_regex_script(ref: str, tk: UserTavern) -> dict[str, Any]:
    return _wire(await _admin(tk).get(ref))


@router.patch("/scripts/{ref}")
async def patch_regex_script(ref: str, body: ScriptJson, tk: UserTavern) -> dict[str, Any]:
    """Set the fields given; the script's other keys stay, in their place."""
    return _wire(await _admin(tk).update(ref, body))


@router.delete("/scripts/{ref}", status_code=204)
async def delete_regex_script(ref: str, tk: UserTavern) -> None:
    await _admin(tk).delete(ref)


@router.put("/scripts/{ref}/position")
async def move_regex_script(ref: str, body: Position, tk: UserTavern) -> list[dict[str, Any]]:
    """Move the script (0 runs first); answers the new order."""
    return [_wire(s) for s in await _admin(tk).move(ref, body.position)]


@router.put("/scripts/{ref}/enabled")
async def enable_regex_script(ref: str, body: Enabled, tk: UserTavern) -> dict[str, Any]:
    return _wire(await _admin(tk).set_enabled(ref, body.enabled))


@router.post("/import", status_code=201)
async def import_regex_scripts(
    body: Annotated[Any, Body(description="a script object or a list of them")],
    tk: UserTavern,
) -> list[dict[str, Any]]:
    """SillyTavern's export file(s): appended to the global list with fresh ids."""
    return [_wire(s) for s in await _admin(tk).import_scripts(body, source="<upload>")]


def _download(name: str, text: str) -> Response:
    return Response(
        content=text.encode("utf-8"),
        media_type="application/json",
        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}"},
    )


@router.get("/export", response_class=Response)
async def export_regex_scripts(tk: UserTavern) -> Response:
    return _download(*await _admin(tk).export())


@router.get("/scripts/{ref}/export", response_class=Response)
async def export_regex_script(ref: str, tk: UserTavern) -> Response:
    return _download(*await _admin(tk).export(ref))


@router.get("/characters/{ref}")
async def character_regex_scripts(ref: str, tk: UserTavern) -> CharacterScripts:
    return CharacterScripts.of(await _admin(tk).character_scripts(ref))


@router.put("/characters/{ref}/allowed")
async def allow_character_regex(ref: str, body: Allowed, tk: UserTavern) -> CharacterScripts:
    """Let the card's embedded scripts run (or stop them again)."""
    return CharacterScripts.of(await _admin(tk).allow_character(ref, body.allowed))


@router.put("/presets/{ref}/allowed")
async def allow_preset_regex(ref: str, body: Allowed, tk: UserTavern) -> dict[str, Any]:
    """Let the chat preset's embedded scripts run (or stop them again)."""
    preset_id = await _admin(tk).allow_preset(ref, body.allowed)
    return {"preset_id": preset_id, "allowed": body.allowed}


@router.post("/test")
async def test_regex_script(body: TestBox, tk: UserTavern) -> TestOutput:
    """The text through that one script, whatever its placement, flags and depths."""
    result = _admin(tk).test(body.script, body.text)
    return TestOutput(output=result.output, valid=result.valid)
