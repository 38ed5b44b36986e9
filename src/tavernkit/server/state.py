"""``ServerState``: the objects one server holds (``app.state.server``), and the
dependencies that hand them to routes."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from tavernkit.errors import TavernKitError, TooManyAttempts
from tavernkit.facade import Tavern
from tavernkit.server.accounts import Accounts
from tavernkit.server.card_facets import CardFacets
from tavernkit.server.coordination import RateLimiter
from tavernkit.server.principal import Principal
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
    thumbnails: Thumbnails = field(default_factory=Thumbnails)
    #: the cards' favourite flags and tags, for the character list's filters and orders
    card_facets: CardFacets = field(default_factory=CardFacets)
    #: each user's fallback to the server's shared route (accounts on only)
    shared: SharedRoutes | None = None

    def tavern_for(self, principal: Principal) -> Tavern:
        """The Tavern of ``principal``'s owner (cached; shares the one store). With accounts
        on, its chat turns fall back to the shared route (:mod:`.shared_route`)."""
        view = self.tavern.for_owner(principal.owner)
        if self.shared is not None and view.chats.shared_route is None:
            view.chats.shared_route = self.shared.route_for(principal)
        return view

    async def admit_turn(self, principal: Principal) -> None:
        """Count one model call against the principal's ``turn_rate``; raises
        :class:`~tavernkit.errors.TooManyAttempts` when it is used up. Every route that can
        make the server call a model (or an MCP server) calls it before anything else, through
        :data:`~tavernkit.server.routes._common.ModelCall` (the facade, which answers its own
        errors, directly), so a request that then fails counts too."""
        rate = self.settings.turn_rate
        decision = await self.limiter.hit(
            f"turns:{principal.user_id}", limit=rate.limit, window_s=rate.window_s
        )
        if not decision.allowed:
            raise TooManyAttempts(
                "too many model calls (turns, tasks, tests); try again later",
                retry_after_s=decision.retry_after_s,
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
