"""Connection profiles: where replies come from. Keys are write-only: a profile is created
with its keys, and every answer shows a key only as its label and fingerprint.

With accounts on, a profile may reference an environment key (``env:NAME``, the server's own
keys) only when an admin makes it: a user brings their own keys."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, Field

from tavernkit.errors import PermissionDenied
from tavernkit.models.profile import ApiFamily, ProfileTimeouts, ReviewSettings
from tavernkit.profile_admin import ENV_PREFIX, ProfileSummary
from tavernkit.server.auth import CurrentPrincipal, UserTavern
from tavernkit.server.routes._common import State

__all__ = ["router"]

router = APIRouter(prefix="/profiles", tags=["profiles"])


class Profile(BaseModel):
    name: str
    api: str
    source: str
    model: str | None
    base_url: str | None
    active: bool
    #: one label per key: ``label (fingerprint)``, or ``$NAME`` for an environment key
    keys: list[str]
    fallbacks: list[str]
    preset: str | None
    timeouts: ProfileTimeouts
    review: ReviewSettings | None
    randomize: bool

    @classmethod
    def of(cls, s: ProfileSummary) -> Profile:
        return cls(
            name=s.name,
            api=s.api,
            source=s.source,
            model=s.model,
            base_url=s.base_url,
            active=s.active,
            keys=list(s.keys),
            fallbacks=list(s.fallbacks),
            preset=s.preset,
            timeouts=s.timeouts,
            review=s.review,
            randomize=s.randomize,
        )


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


async def _summary(tk: UserTavern, name: str) -> Profile:
    for summary in await tk.profiles.summaries():
        if summary.name == name:
            return Profile.of(summary)
    await tk.profiles.get(name)  # NotFound
    raise AssertionError("unreachable")


@router.get("")
async def list_profiles(tk: UserTavern) -> list[Profile]:
    return [Profile.of(s) for s in await tk.profiles.summaries()]


@router.get("/{name}")
async def get_profile(name: str, tk: UserTavern) -> Profile:
    return await _summary(tk, name)


@router.post("", status_code=201)
async def create_profile(
    body: NewProfile, tk: UserTavern, who: CurrentPrincipal, state: State
) -> Profile:
    """Create (``replace``: overwrite) a profile with its pool of keys; nothing is stored when
    any part is refused."""
    server_keys = any(k.startswith(ENV_PREFIX) for k in body.keys)
    if server_keys and state.settings.accounts and not who.is_admin:
        raise PermissionDenied("only an admin may use the server's environment keys")
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
