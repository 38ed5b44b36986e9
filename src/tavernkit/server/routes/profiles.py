"""Connection profiles: where replies come from. Keys are write-only: a profile is created
with its keys, and every answer shows a key only as its label and fingerprint.

With accounts on, a profile may reference an environment key (``env:NAME``, the server's own
keys) only when an admin makes it: a user brings their own keys, and a user's ``base_url`` must
be one the egress policy allows (:mod:`tavernkit.egress`; 403 ``EgressRefused``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, Field

from tavernkit.errors import PermissionDenied, ServerConfigError
from tavernkit.facade import Tavern
from tavernkit.models.profile import ApiFamily, ProfileTimeouts
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
    server_keys = any(k.startswith(ENV_PREFIX) for k in body.keys)
    if server_keys and state.settings.accounts and not who.is_admin:
        raise PermissionDenied("only an admin may use the server's environment keys")
    await check_egress(tk, body.base_url, field="base_url")
    return await _add(tk, body)


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
