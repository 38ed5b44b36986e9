"""``ctx.connection_profiles``: the stored connection profiles of the context's owner."""

from __future__ import annotations

from tavernkit.context.port import RequestPort
from tavernkit.errors import NotFound
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.models.profile import ConnectionProfile

__all__ = ["ConnectionProfiles"]


class ConnectionProfiles:
    """The stored connection profiles of the context's owner. Profiles hold credential
    *references* only; no call here returns a secret."""

    def __init__(self, context: RequestPort) -> None:
        self._context = context

    async def list(self) -> list[ConnectionProfile]:
        runtime = self._context.runtime
        out = []
        for info in await runtime.store.list("connection_profile", owner=runtime.owner):
            profile = await runtime.store.get("connection_profile", info.id, owner=runtime.owner)
            if isinstance(profile, ConnectionProfile):
                out.append(profile)
        return sorted(out, key=lambda p: p.name)

    async def get(self, name: str) -> ConnectionProfile | None:
        runtime = self._context.runtime
        try:
            profile = await runtime.store.get("connection_profile", name, owner=runtime.owner)
        except NotFound:
            return None
        return profile if isinstance(profile, ConnectionProfile) else None

    async def resolve(self, name: str = "", *, model_override: str = "") -> ResolvedConnection:
        """The connection a call with ``api_preset_name=name`` would use (the active profile
        for ``""``, the embedded model when none is configured)."""
        return await self._context.resolve_named(name, model_override)
