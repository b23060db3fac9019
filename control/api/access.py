"""Who may do what: API tokens (`anneal token`), the audit log (`anneal audit`), and the middleware writing it.

The routes are the admin's. The audit middleware sits outside each API's error middleware,
so it records the status the caller got; a request is recorded once its caller is known
(a refusal for want of any valid token is not: it names no one, and would let anyone fill
the log).
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Middleware

from control.api.app_keys import BEFORE_LINGER, PRINCIPAL, RUNTIME
from control.api.body import read_object
from control.api.middleware import Handler, auth, ok, optional_int_query, time_query
from control.services import audit, tokens

log = logging.getLogger(__name__)
routes = web.RouteTableDef()
#: The methods that change something: every request with one is audited.
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Rows `GET /v1/audit` returns when the query gives no limit.
DEFAULT_LIMIT = 100


def audited(api: str) -> Middleware:
    """A middleware recording every mutating request of *api* (operator, heat or ui) whose caller is known."""

    @web.middleware
    async def audit_log(request: web.Request, handler: Handler) -> web.StreamResponse:
        route_handler = request.match_info.route.handler
        if request.method not in MUTATING or getattr(route_handler, "anneal_changes_nothing", False):
            return await handler(request)
        written: list[int] = []

        async def once(status: int) -> None:
            if not written and request.get(PRINCIPAL) is not None:
                written.append(status)
                await _record(request, api if not request.path.startswith("/ui/") else "ui", status)

        request[BEFORE_LINGER] = once
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as e:
            status = e.status
            raise
        finally:
            await once(status)

    return audit_log


async def _record(request: web.Request, api: str, status: int) -> None:
    """One audit row; a failure to write it is logged, never turned into the caller's error."""
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else request.path
    target = " ".join(f"{k}={v}" for k, v in request.match_info.items())
    try:
        await audit.record(
            request.app[RUNTIME], request[PRINCIPAL], api, (request.method, route, target), status
        )
    except Exception as e:  # the database is down: the request's own answer stands
        log.warning("audit row for %s %s not written: %s", request.method, request.path, e)


@routes.post("/v1/tokens")
@auth("admin")
async def create_token(request: web.Request) -> web.Response:
    """A new token ``{project, role, name, expires}``; its value is in this answer only."""
    return ok(await tokens.create(request.app[RUNTIME], await read_object(request, 64 * 1024)), 201)


@routes.get("/v1/tokens")
@auth("admin")
async def list_tokens(request: web.Request) -> web.Response:
    return ok(await tokens.list_tokens(request.app[RUNTIME]))


@routes.delete("/v1/tokens/{id}")
@auth("admin")
async def revoke_token(request: web.Request) -> web.Response:
    """Revoke a token: every process refuses it from its next request on."""
    return ok(await tokens.revoke(request.app[RUNTIME], request.match_info["id"]))


@routes.get("/v1/audit")
@auth("admin")
async def audit_log(request: web.Request) -> web.Response:
    """The newest audit rows (``limit``, default 100) at or after ``since`` (ISO 8601 or epoch seconds)."""
    limit = optional_int_query(request, "limit", 1) or DEFAULT_LIMIT
    return ok(await audit.entries(request.app[RUNTIME], time_query(request, "since"), limit))
