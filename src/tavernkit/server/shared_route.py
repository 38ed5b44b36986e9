"""Whose key pays (brief 003, "deferred server route").

A user's own keys (bring your own key) and the keys an admin shares are separate credential
scopes. The shared ones live under their own store owner, :data:`SERVER_OWNER`: the admin keeps
the shared profiles there (``/shared/profiles``), and no user's view can read them. A user's
turn plans its own profile, keys and fallback chain first (paid by the user's scope); only when
every one of those attempts failed does the plan ask for the shared route
(:class:`~tavernkit.chat.plan.SharedRoute`), and the route is admitted only when

1. the admin's policy allows it (``ServerSettings.shared_fallback``),
2. the user's own setting allows it (``shared_fallback`` on their account),
3. the shared profile has a key that is not cooling down (a pool of one key rests too:
   ``PlanSources.rest_lone_keys``), and
4. the user's quota of shared fallbacks (``ServerSettings.shared_rate``) has room;

in that order, so a refused route spends no quota. From then on the attempts are paid by
the server's scope (``AttemptRecord.paid_by == "server:server"``), with the server's keys,
rotation and cooldowns. A turn the user's keys answer never reads the shared profile.

What the user is told keeps the server's choices to the server: the fallback notice, the
turn's error and the reply's (or task's) model name say :data:`SHOWN_AS`, never the shared
profile's model or provider. Each request the route sends asks for at most
``ServerSettings.shared_max_tokens`` output tokens (turns, tasks and the facade alike).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from tavernkit.chat.plan import PlanSources, SharedRoute
from tavernkit.chat.prepare import resolve_profile
from tavernkit.facade import Tavern
from tavernkit.generation.keys import StoreCooldownStore
from tavernkit.generation.plan import AdmissionRequest, FundingScope
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.models.profile import ConnectionProfile
from tavernkit.server.coordination import RateLimiter
from tavernkit.server.principal import Principal
from tavernkit.server.settings import ServerSettings
from tavernkit.store.accounts import AccountStore

__all__ = ["SERVER_OWNER", "SERVER_SCOPE", "SHOWN_AS", "SharedRoutes"]

#: the store owner of what the server itself owns: the shared profiles and their keys
SERVER_OWNER = "server"
SERVER_SCOPE = FundingScope("server", SERVER_OWNER, kind="server")
#: what a user is shown in place of the shared route's models
SHOWN_AS = "the server's shared connection"


@dataclass
class SharedRoutes:
    """Makes each user's :class:`~tavernkit.chat.plan.SharedRoute` (see the module doc)."""

    settings: ServerSettings
    tavern: Tavern
    accounts: AccountStore
    limiter: RateLimiter

    @property
    def server(self) -> Tavern:
        """The server's own view (owner :data:`SERVER_OWNER`)."""
        return self.tavern.for_owner(SERVER_OWNER)

    def sources(self) -> PlanSources:
        server = self.server

        async def resolve(profile: ConnectionProfile) -> ResolvedConnection:
            return await resolve_profile(
                server.store,
                profile,
                owner=SERVER_OWNER,
                local_factory=server.runtime.local_models,
            )

        return PlanSources(
            server.store,
            SERVER_OWNER,
            resolve,
            time.time,
            os.environ,
            server.key_cooldowns,
            rest_lone_keys=True,  # a pool of one key rests too: admission reads its cooldown
        )

    def route_for(self, principal: Principal) -> SharedRoute | None:
        """The shared route of ``principal``'s turns (``None``: there is none to offer)."""
        profile = self.settings.shared_profile
        if profile is None or principal.owner == SERVER_OWNER:
            return None

        async def admission(request: AdmissionRequest) -> bool:
            if request.purpose != "deferred_route":
                return True  # the route's own attempts: its key pool rotates and cools
            return await self._admit(principal, profile)

        return SharedRoute(
            self.sources(),
            profile,
            SERVER_SCOPE,
            admission,
            shown_as=SHOWN_AS,
            max_tokens=self.settings.shared_max_tokens,
        )

    async def _admit(self, principal: Principal, profile: str) -> bool:
        if not self.settings.shared_fallback:
            return False
        user = await self.accounts.get_user(principal.user_id)
        if not user.shared_fallback or not await self._a_key_is_ready(profile):
            return False
        rate = self.settings.shared_rate
        decision = await self.limiter.hit(
            f"shared:{principal.user_id}", limit=rate.limit, window_s=rate.window_s
        )
        return decision.allowed

    async def _a_key_is_ready(self, name: str) -> bool:
        """Whether the shared profile has a key not cooling down (a keyless one always has)."""
        server = self.server
        try:
            profile = await server.profiles.get(name)
        except LookupError:
            return False
        stored = StoreCooldownStore(server.store)
        now = time.time()
        refs = [c for c in profile.credentials if c.key_id or c.env]
        for ref in refs:
            # the route's pool rests a key for the profile's model (chat/plan.py)
            model = profile.model or ""
            if ref.key_id:
                status = await stored.get(SERVER_OWNER, profile.source, ref.key_id, model)
            else:
                key = f"env:{ref.env}"
                status = await server.key_cooldowns.get(SERVER_OWNER, profile.source, key, model)
            if not status.cooling(now):
                return True
        return not refs
