"""``ServerState``: the objects one server holds (``app.state.server``), and the
dependencies that hand them to routes."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from tavernkit.egress import EgressPolicy
from tavernkit.errors import LimitExceeded, TavernKitError, TooManyAttempts
from tavernkit.facade import Tavern
from tavernkit.server.accounts import Accounts
from tavernkit.server.avatar_presence import AvatarPresence
from tavernkit.server.avatars import import_avatar
from tavernkit.server.backup_schedule import BackupSchedule
from tavernkit.server.card_facets import CardFacets
from tavernkit.server.coordination import RateLimiter
from tavernkit.server.metrics import ServerMetrics
from tavernkit.server.principal import Principal
from tavernkit.server.script_runs import ScriptRuns
from tavernkit.server.settings import ServerSettings
from tavernkit.server.shared_route import SharedRoutes
from tavernkit.server.thumbnails import Thumbnails
from tavernkit.server.turns import TurnHub

__all__ = ["ServerState", "server_state", "state_of"]


@dataclass(slots=True)
class ServerState:
    """What the routes of one server share. ``tavern`` is the server's own (its owner is the
    local user's); each principal works through :meth:`tavern_for`, a view over the same
    store."""

    settings: ServerSettings
    tavern: Tavern
    accounts: Accounts
    limiter: RateLimiter
    #: the chat turns this process runs (``/chats/{id}/turns``)
    turns: TurnHub
    #: the app's Prometheus metrics (``GET /metrics``)
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    thumbnails: Thumbnails = field(default_factory=Thumbnails)
    #: the cards' favourite flags and tags, for the character list's filters and orders
    card_facets: CardFacets = field(default_factory=CardFacets)
    #: which characters have an avatar (a list line's or a chat's picture URL, or none)
    avatars: AvatarPresence = field(default_factory=AvatarPresence)
    #: each user's fallback to the server's shared route (accounts on only)
    shared: SharedRoutes | None = None
    #: the policy non-admin users' outbound requests go through (accounts on only)
    egress: EgressPolicy | None = None
    #: the scheduled backups (``serve --backup-every``; ``None``: none scheduled)
    backups: BackupSchedule | None = None
    #: what ``/health/ready`` asks besides the database (``redis``: a PING), by name
    probes: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)
    #: scripts waiting for their user's answers (``"interactive": true`` script runs)
    script_runs: ScriptRuns = field(default_factory=ScriptRuns)

    def tavern_for(self, principal: Principal) -> Tavern:
        """The Tavern of ``principal``'s owner (cached; shares the one store). With accounts
        on, its chat turns fall back to the shared route (:mod:`.shared_route`), a
        non-admin's requests (turns, tasks, the facade, embeddings, MCP) go through the
        egress policy (:mod:`tavernkit.egress`), and what its imports are about to store is
        held to the principal's storage quota."""
        view = self.tavern.for_owner(principal.owner)
        view.runtime.egress = None if principal.is_admin else self.egress
        if self.shared is not None and view.chats.shared_route is None:
            view.chats.shared_route = self.shared.route_for(principal)
        library = view.library
        library.avatar_policy = import_avatar
        if self._quota_applies(principal):
            library.admit_bytes = functools.partial(self.admit_storage, principal)
        else:
            library.admit_bytes = None
        return view

    def _quota_applies(self, principal: Principal) -> bool:
        return (
            self.settings.accounts
            and self.settings.user_quota_bytes is not None
            and not principal.is_admin
        )

    async def admit_storage(self, principal: Principal, adding: int) -> None:
        """Refuse (:class:`~tavernkit.errors.LimitExceeded`, 413, naming the numbers) a write
        of ``adding`` bytes that would take the principal past their storage quota. With
        accounts off, and for admins, there is none."""
        limit = self.settings.user_quota_bytes
        if limit is None or not self._quota_applies(principal):
            return
        used = await self.tavern.store.storage_used(owner=principal.owner)
        if used + adding > limit:
            what = f"; this adds {adding} more" if adding else ""
            raise LimitExceeded(
                f"storage quota: {used} bytes stored of the {limit} allowed{what} "
                "(delete something first)",
                field="storage_quota",
            )

    async def admit_turn(self, principal: Principal) -> None:
        """Count one model call against the principal's turn rate (none for the local user
        unless ``turn_rate`` is set: :attr:`ServerSettings.turn_limit`); raises
        :class:`~tavernkit.errors.TooManyAttempts` when it is used up. Every route that can
        make the server call a model (or an MCP server) calls it before anything else, through
        :data:`~tavernkit.server.routes._common.ModelCall` (the facade, which answers its own
        errors, directly), so a request that then fails counts too."""
        rate = self.settings.turn_limit
        if rate is None:  # the local user: no limit (ServerSettings.turn_rate)
            return
        decision = await self.limiter.hit(
            f"turns:{principal.user_id}", limit=rate.limit, window_s=rate.window_s
        )
        if not decision.allowed:
            raise TooManyAttempts(
                "too many model calls (turns, tasks, tests); try again later",
                retry_after_s=decision.retry_after_s,
                refusal="model_calls",
            )


def state_of(request: Request) -> ServerState:
    """The server's objects, for a route that reads them itself."""
    state = getattr(request.app.state, "server", None)
    if not isinstance(state, ServerState):
        raise TavernKitError("the server is not started (no lifespan ran)")
    return state


async def server_state(request: Request) -> ServerState:
    """The dependency every route reaches the server's objects through (a coroutine: FastAPI
    runs a plain function dependency in a worker thread, a thread hop per request)."""
    return state_of(request)
