"""Connection profiles: where replies come from. Keys are write-only: a profile is created
with its keys, and every answer shows a key only as its label and fingerprint. ``PATCH``
changes a profile's fields and keeps its keys unless it names a new pool; ``PUT
.../fallbacks`` sets its fallback chain (the profiles and models tried when it fails).

With accounts on, a profile may reference an environment key (``env:NAME``, the server's own
keys) only when an admin makes it: a user brings their own keys, and a user's ``base_url`` must
be one the egress policy allows (:mod:`tavernkit.egress`; 403 ``EgressRefused``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.errors import FormatError, PermissionDenied, ServerConfigError
from tavernkit.facade import Tavern
from tavernkit.models.profile import ApiFamily, ProfileTimeouts, ReviewSettings
from tavernkit.profile_admin import ENV_PREFIX, ProfileSummary
from tavernkit.server.auth import AdminPrincipal, CurrentPrincipal, UserTavern
from tavernkit.server.routes._common import State, check_egress

__all__ = ["router", "shared_router"]

router = APIRouter(prefix="/profiles", tags=["profiles"])


class NewProfile(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    api: ApiFamily = "chat"
    source: str = Field(default="openai", min_length=1, max_length=100)
    base_url: str | None = Field(default=None, max_length=2000)
    model: str | None = Field(default=None, max_length=500)
    #: the API keys (write-only), or ``env:NAME`` for an environment variable
    keys: Annotated[list[str], Field(max_length=50)] = []
    preset: str | None = None
    timeouts: ProfileTimeouts | None = None
    replace: bool = False
    activate: bool = False


class ProfilePatch(BaseModel):
    """The fields to change (a field left out is unchanged; ``null`` clears the base URL,
    model, preset or review)."""

    model_config = ConfigDict(extra="forbid")

    api: ApiFamily | None = None
    source: str | None = Field(default=None, min_length=1, max_length=100)
    base_url: str | None = Field(default=None, max_length=2000)
    model: str | None = Field(default=None, max_length=500)
    #: a new pool of keys replacing the stored one (write-only)
    keys: Annotated[list[str], Field(max_length=50)] | None = None
    preset: str | None = Field(default=None, max_length=200)
    timeouts: ProfileTimeouts | None = None
    #: response review of the profile's chat turns (``null``: none)
    review: ReviewSettings | None = None


class FallbackStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: str = Field(min_length=1, max_length=200)
    #: another model of that profile (``null``: its own)
    model: str | None = Field(default=None, max_length=500)


class Fallbacks(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entries: Annotated[list[FallbackStep], Field(max_length=50)] = []
    #: each turn one member of the pool leads (brief 003's randomizer)
    randomize: bool = False


def _check_server_keys(keys: list[str], who: CurrentPrincipal, state: State) -> None:
    server_keys = any(k.startswith(ENV_PREFIX) for k in keys)
    if server_keys and state.settings.accounts and not who.is_admin:
        raise PermissionDenied("only an admin may use the server's environment keys")


async def _summary(tk: Tavern, name: str) -> ProfileSummary:
    for summary in await tk.profiles.summaries():
        if summary.name == name:
            return summary
    await tk.profiles.get(name)  # NotFound
    raise AssertionError("unreachable")


@router.get("")
async def list_profiles(tk: UserTavern) -> list[ProfileSummary]:
    """Every profile, its keys shown as ``label (fingerprint)`` or ``$NAME`` (never a secret)."""
    return await tk.profiles.summaries()


@router.get("/{name}")
async def get_profile(name: str, tk: UserTavern) -> ProfileSummary:
    return await _summary(tk, name)


@router.post("", status_code=201)
async def create_profile(
    body: NewProfile, tk: UserTavern, who: CurrentPrincipal, state: State
) -> ProfileSummary:
    """Create (``replace``: overwrite) a profile with its pool of keys; nothing is stored when
    any part is refused."""
    _check_server_keys(body.keys, who, state)
    await check_egress(tk, body.base_url, field="base_url")
    return await _add(tk, body)


@router.patch("/{name}")
async def update_profile(
    name: str, body: ProfilePatch, tk: UserTavern, who: CurrentPrincipal, state: State
) -> ProfileSummary:
    """Change the fields the body names; the key pool stays unless ``keys`` replaces it.
    Nothing is stored when any part is refused."""
    given = body.model_fields_set
    for required in ("api", "source"):
        if required in given and getattr(body, required) is None:
            raise FormatError(f"a profile's {required} cannot be cleared", field=required)
    if body.keys is not None:
        _check_server_keys(body.keys, who, state)
    names = {"preset": "chat_preset"}
    changes = {names.get(key, key): getattr(body, key) for key in given if key != "keys"}
    if changes.get("timeouts") is None and "timeouts" in changes:
        changes["timeouts"] = ProfileTimeouts()
    await tk.profiles.update(name, changes, keys=body.keys)
    return await _summary(tk, name)


@router.put("/{name}/fallbacks")
async def set_fallbacks(name: str, body: Fallbacks, tk: UserTavern) -> ProfileSummary:
    """Make the profile's fallback chain these steps, in order (each a stored profile,
    optionally with another model)."""
    steps = [(step.profile, step.model) for step in body.entries]
    await tk.profiles.set_fallbacks(name, steps, randomize=body.randomize)
    return await _summary(tk, name)


async def _add(tk: Tavern, body: NewProfile) -> ProfileSummary:
    await tk.profiles.add(
        body.name,
        api=body.api,
        source=body.source,
        base_url=body.base_url,
        model=body.model,
        keys=body.keys,
        preset=body.preset,
        timeouts=body.timeouts,
        replace=body.replace,
        activate=body.activate,
    )
    return await _summary(tk, body.name)


@router.delete("/{name}", status_code=204)
async def delete_profile(name: str, tk: UserTavern) -> None:
    """Delete the profile with the keys stored for it."""
    await tk.profiles.remove(name)


# -- the server's shared profiles (admins only) ----------------------------------------------

shared_router = APIRouter(prefix="/shared/profiles", tags=["profiles"])


def _server(state: State) -> Tavern:
    if state.shared is None:
        raise ServerConfigError("accounts are off: there is no shared route to configure")
    return state.shared.server


@shared_router.get("")
async def list_shared_profiles(admin: AdminPrincipal, state: State) -> list[ProfileSummary]:
    """The server's own profiles; ``ServerSettings.shared_profile`` names the one personal
    turns fall back to (see :mod:`tavernkit.server.shared_route`)."""
    return await _server(state).profiles.summaries()


@shared_router.post("", status_code=201)
async def create_shared_profile(
    body: NewProfile, admin: AdminPrincipal, state: State
) -> ProfileSummary:
    """A profile paid by the server (its keys, ``env:NAME`` ones too), never readable by a
    user's own routes."""
    return await _add(_server(state), body)


@shared_router.delete("/{name}", status_code=204)
async def delete_shared_profile(name: str, admin: AdminPrincipal, state: State) -> None:
    await _server(state).profiles.remove(name)
