"""``GET /metrics``: the server's Prometheus metrics (:mod:`tavernkit.server.metrics`) in the
text exposition format.

Who may read them: with accounts off (a loopback-only server) the local user, as every
route; with accounts on, an admin (session or API token), or a scraper sending
``Authorization: Bearer <metrics token>`` (``serve --metrics-token`` /
``TAVERNKIT_METRICS_TOKEN``), a secret that opens this route and nothing else.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from starlette.responses import Response

from tavernkit.server.auth import admin_principal
from tavernkit.server.metrics import CONTENT_TYPE
from tavernkit.server.state import state_of

__all__ = ["router"]

router = APIRouter(tags=["server"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def metrics(request: Request) -> Response:
    state = state_of(request)
    if not _scraper(request, state.settings.metrics_token):
        await admin_principal(request)  # 401 or 403 for anyone else
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)


def _scraper(request: Request, token: str | None) -> bool:
    """Whether the request carries the metrics token (compared in constant time)."""
    if not token:
        return False
    scheme, _, sent = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode())
