"""Health checks (no sign-in needed).

- ``GET /health``: the server is up and its store answers.
- ``GET /health/live``: the process answers at all (a liveness probe: it touches nothing, so
  a database outage never gets a healthy process restarted).
- ``GET /health/ready``: the process can serve: the database answers and, with several
  processes, Redis does (a readiness probe: a load balancer stops sending requests while it
  is 503, and while the process shuts down).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel
from starlette.responses import JSONResponse

from tavernkit.server.errors import UNAVAILABLE_RETRY_S
from tavernkit.server.state import ServerState, server_state

__all__ = ["router"]

router = APIRouter(tags=["server"])

log = logging.getLogger(__name__)

#: how long one dependency may take to answer a readiness check
CHECK_TIMEOUT_S = 2.0


class Health(BaseModel):
    status: str
    accounts: bool


class Live(BaseModel):
    status: Literal["ok"]


class Ready(BaseModel):
    #: ``ok``, or ``unavailable`` (answered with 503)
    status: str
    #: each dependency's state: ``ok``, ``unavailable``; ``draining`` while shutting down
    checks: dict[str, str]


@router.get("/health")
async def health(state: Annotated[ServerState, Depends(server_state)]) -> Health:
    await state.tavern.store.count_users()
    return Health(status="ok", accounts=state.settings.accounts)


@router.get("/health/live")
async def live() -> Live:
    return Live(status="ok")


@router.get(
    "/health/ready",
    response_model=Ready,
    responses={503: {"model": Ready, "description": "a dependency is down, or shutting down"}},
)
async def ready(state: Annotated[ServerState, Depends(server_state)]) -> JSONResponse:
    probes = {"database": state.tavern.store.count_users, **state.probes}
    names = list(probes)
    results = await asyncio.gather(
        *(asyncio.wait_for(probes[name](), CHECK_TIMEOUT_S) for name in names),
        return_exceptions=True,
    )
    checks: dict[str, str] = {}
    for name, result in zip(names, results, strict=True):
        if isinstance(result, BaseException):
            log.warning("readiness: %s unavailable (%s)", name, type(result).__name__)
            checks[name] = "unavailable"
        else:
            checks[name] = "ok"
    if state.turns.draining:
        checks["server"] = "draining"
    healthy = all(value == "ok" for value in checks.values())
    body = Ready(status="ok" if healthy else "unavailable", checks=checks)
    if healthy:
        return JSONResponse(body.model_dump())
    return JSONResponse(
        body.model_dump(), status_code=503, headers={"Retry-After": str(UNAVAILABLE_RETRY_S)}
    )
