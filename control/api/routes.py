"""Every route of the API, one table per audience: the operator, agents, Heat's agent chain."""

from __future__ import annotations

from aiohttp import web

from control.api import access, agent, fleet, heat, metrics, operator

ROUTES: list[web.AbstractRouteDef] = [
    *operator.routes,
    *fleet.routes,
    *access.routes,
    *agent.routes,
    *heat.routes,
    *metrics.routes,
]
