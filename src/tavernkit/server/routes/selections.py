"""What is active now (``Settings.selections``): the connection profile, the utility profile
(side tasks: summaries, review, ``generate_task`` with ``side_task``), the chat-completion
and text-completion presets, the default persona and the user's name, plus the personas
locked to characters. ``PATCH`` sets only the keys it names (``null`` clears one); a profile,
preset or persona that is not stored is a 404 naming it, and nothing is stored then.

No profile selected means the embedded model; ``embedded`` says which model that is and, when
it cannot run here, why. The instruct, context and system-prompt templates are prompt
settings (``PATCH /settings``, ``prompt.instruct_template``...); the personas locked to chats
and characters are set at ``/chats/{id}/persona`` and ``/characters/{ref}/persona``.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.chat.personas import Personas
from tavernkit.errors import FormatError, NotFound
from tavernkit.models.settings import Settings
from tavernkit.providers.local_engine import local_model_missing
from tavernkit.providers.profiles import LOCAL_MODEL_NAME
from tavernkit.server.auth import UserTavern

__all__ = ["router"]

router = APIRouter(prefix="/settings/selections", tags=["settings"])


class EmbeddedModel(BaseModel):
    """The connection a turn uses when no profile is selected."""

    name: str = "embedded"
    api: str = "local"
    source: str = "local"
    model: str = LOCAL_MODEL_NAME
    #: why it cannot run here (``None``: it can)
    missing: str | None = None


class SelectionsBody(BaseModel):
    #: the active connection profile's name (``None``: the embedded model)
    profile: str | None
    #: the profile side tasks run on (``None``: ``profile``'s)
    utility_profile: str | None
    #: the chat-completion preset's name (a profile that binds one uses its own)
    chat_preset: str | None
    #: the text-completion preset's name
    textgen_preset: str | None
    #: the default persona's id
    persona: str | None
    user_name: str
    #: character id -> the id of the persona locked to it
    character_personas: dict[str, str]
    embedded: EmbeddedModel


class SelectionsPatch(BaseModel):
    """The selections to set (a key left out is unchanged; ``null`` clears it)."""

    model_config = ConfigDict(extra="forbid")

    profile: str | None = Field(None, max_length=200)
    utility_profile: str | None = Field(None, max_length=200)
    chat_preset: str | None = Field(None, max_length=200)
    textgen_preset: str | None = Field(None, max_length=200)
    persona: str | None = Field(None, max_length=200)
    user_name: str | None = Field(None, max_length=200)


def _view(settings: Settings) -> SelectionsBody:
    sel = settings.selections
    return SelectionsBody(
        profile=sel.profile,
        utility_profile=sel.utility_profile,
        chat_preset=sel.chat_preset,
        textgen_preset=sel.textgen_preset,
        persona=sel.persona,
        user_name=sel.user_name,
        character_personas=dict(sel.character_personas),
        embedded=EmbeddedModel(missing=local_model_missing()),
    )


@router.get("")
async def get_selections(tk: UserTavern) -> SelectionsBody:
    return _view(await tk.settings())


async def _record_name(tk: UserTavern, kind: str, label: str, ref: str) -> str:
    try:
        return (await tk.store.get_record(kind, ref, owner=tk.owner)).info.name
    except NotFound:
        raise NotFound(f"no {label} named {ref!r}") from None


@router.patch("")
async def patch_selections(body: SelectionsPatch, tk: UserTavern) -> SelectionsBody:
    """Set the keys the body names, each checked first; stored in one write."""
    given = body.model_fields_set
    changes: dict[str, str | None] = {}
    for key in ("profile", "utility_profile"):
        if key in given:
            ref = getattr(body, key)
            changes[key] = (await tk.profiles.get(ref)).name if ref else None
    for key, kind, label in (
        ("chat_preset", "chat_preset", "chat-completion preset"),
        ("textgen_preset", "textgen_preset", "text-completion preset"),
    ):
        if key in given:
            ref = getattr(body, key)
            changes[key] = await _record_name(tk, kind, label, ref) if ref else None
    personas = Personas(tk.store, owner=tk.owner)
    if "persona" in given:
        changes["persona"] = (await personas.get(body.persona))[0] if body.persona else None
    if "user_name" in given:
        name = (body.user_name or "").strip()
        if not name:
            raise FormatError("the user's name cannot be blank", field="user_name")
        changes["user_name"] = name
    settings = await tk.settings()
    if changes:
        settings.selections = settings.selections.model_copy(update=changes)
        await tk.store.put_settings(settings, owner=tk.owner)
    return _view(settings)
