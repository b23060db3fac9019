"""What the web view's pages read (session cookie): stacks, graphs, deployments, servers, events, failures.

Each answer comes from the services the REST API uses, masked as the API masks it. A stack's
events also arrive as server-sent events, read from the same event stream ``--follow`` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from aiohttp import web
from sqlalchemy import select

from control.api import ownership
from control.api.app_keys import PRINCIPAL, RUNTIME
from control.api.middleware import auth, bool_query, int_query, ok, optional_int_query
from control.api.ownership import within
from control.api.ui.session import COOKIE, form_token
from control.errors import BadRequestError, ControlError
from control.services import overview, queries
from control.services.servers import get_server, server_view
from control.services.stacks import STATE_ONLY, get_stack
from control.store.orm import ServerRow

routes = web.RouteTableDef()
#: Set when the application shuts down: event streams end at once rather than hold the stop.
CLOSING = web.AppKey("ui_closing", asyncio.Event)
#: How long one events request waits for news before a keep-alive comment.
STREAM_WAIT = 10.0
#: A stream ends after this long; the browser reconnects with Last-Event-ID and misses nothing.
STREAM_LIFETIME = 600.0
#: Events per page of the events view and per message of a stream.
EVENTS_PAGE = 200
#: Failed stacks the failures view reads at most.
FAILED_STACKS = 50
READ_ONLY = "read-only: a reader's session changes nothing"


@routes.get("/ui/api/session")
@auth("ui")
async def whoami(request: web.Request) -> web.Response:
    """The session's role and what it may do here (nothing that changes state, today)."""
    principal, rt = request[PRINCIPAL], request.app[RUNTIME]
    view: dict[str, Any] = {
        "role": principal.role,
        "project": principal.project,
        "can_change": principal.can_write,
    }
    if principal.can_write:  # what the stack page's controls send (ui/actions.py)
        view["form_token"] = form_token(rt.keys.admin_token, request.cookies.get(COOKIE, ""))
        view["why"] = "converge and cancel a stack here; everything else with the anneal CLI or the REST API"
    else:
        view["why"] = READ_ONLY
    return ok(view)


@routes.get("/ui/api/stacks")
@auth("ui")
async def stacks(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await overview.stacks_overview(session, ownership.seen(request)))


@routes.get("/ui/api/stacks/{name}/graph")
@auth("ui")
async def graph(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await overview.stack_graph(session, request.match_info["name"], within=within(request)))


@routes.get("/ui/api/stacks/{name}/resources")
@auth("ui")
async def resources(request: web.Request) -> web.Response:
    page, per_page = int_query(request, "page", 1), int_query(request, "per_page", 50)
    if page < 1:
        raise BadRequestError("page: expected 1 or more", where="page")
    state, kind = request.query.get("state") or None, request.query.get("type") or None
    after, before = optional_int_query(request, "after", 0), optional_int_query(request, "before", 1)
    if after is not None and before is not None:
        raise BadRequestError("before: not with after (one page is next to one id)", where="before")
    cursor = ("after", after) if after is not None else ("before", before) if before is not None else None
    name = request.match_info["name"]
    async with request.app[RUNTIME].sessions() as session:
        return ok(
            await overview.resource_page(
                session, name, page, per_page, state, kind, cursor, within=within(request)
            )
        )


@routes.get("/ui/api/stacks/{name}/events")
@auth("ui")
async def events(request: web.Request) -> web.Response:
    """The stack's events (its nested stacks' too), filtered by resource and status, a page at a time."""
    after = int_query(request, "after", 0)
    limit = optional_int_query(request, "limit", 1) or EVENTS_PAGE
    status = request.query.get("status") or None
    if status is not None and status not in ("IN_PROGRESS", "COMPLETE", "FAILED"):
        raise BadRequestError("status: one of IN_PROGRESS, COMPLETE, FAILED", where="status")
    async with request.app[RUNTIME].sessions() as session:
        found = await queries.stack_events(
            session,
            request.match_info["name"],
            after,
            limit=min(limit, EVENTS_PAGE),
            nested_depth=int_query(request, "nested_depth", 1),
            resource=request.query.get("resource") or None,
            status=status,
            within=within(request),
            newest=bool_query(request, "newest"),
            before=optional_int_query(request, "before", 1),
        )
    return ok(found)


@routes.get("/ui/api/stacks/{name}/failures")
@auth("ui")
async def stack_failures(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await queries.stack_failures(session, request.match_info["name"], within=within(request)))


@routes.get("/ui/api/failures")
@auth("ui")
async def failures(request: web.Request) -> web.Response:
    """Every failed top-level stack (the newest FAILED_STACKS) with its failures and their output tails."""
    async with request.app[RUNTIME].sessions() as session:
        failed = [
            s
            for s in await overview.stacks_overview(session, ownership.seen(request))
            if s["status"].endswith("FAILED")
        ]
        return ok(
            [
                {
                    "stack": s["name"],
                    "status": s["status"],
                    "reason": s["status_reason"],
                    "failures": await queries.stack_failures(session, s["id"], within=within(request)),
                }
                for s in failed[-FAILED_STACKS:]
            ]
        )


@routes.get("/ui/api/deployments/{id}")
@auth("ui")
async def deployment(request: web.Request) -> web.Response:
    """A deployment as ``GET /v1/deployments/{id}`` shows it, with its status history."""
    dep_id = request.match_info["id"]
    async with request.app[RUNTIME].sessions() as session:
        view = await queries.show_deployment(session, dep_id, within=within(request))
        view["history"] = await overview.deployment_history(session, dep_id)
        return ok(view)


@routes.get("/ui/api/servers")
@auth("ui")
async def servers(request: web.Request) -> web.Response:
    """Every server's agent health, with how many deployments it has in each status."""
    rt = request.app[RUNTIME]
    async with rt.sessions() as session:
        query = select(ServerRow).order_by(ServerRow.name)
        if (project := ownership.seen(request)) is not None:
            query = query.where(ServerRow.project == project)
        rows = list(await session.scalars(query))
        counts = await overview.deployment_counts(session)
        return ok([{**server_view(s, rt.settings), "deployments": counts.get(s.id, {})} for s in rows])


@routes.get("/ui/api/servers/{name}")
@auth("ui")
async def server(request: web.Request) -> web.Response:
    """One server: its health and what it runs (its deployments)."""
    rt = request.app[RUNTIME]
    async with rt.sessions() as session:
        row = await get_server(session, request.match_info["name"], within=within(request))
        view = server_view(row, rt.settings)
        view["deployments"] = await queries.list_deployments(session, {"server": row.id})
        return ok(view)


@routes.get("/ui/api/stacks/{name}/stream")
@auth("ui")
async def stream(request: web.Request) -> web.StreamResponse:
    """The stack's events as server-sent events (``event: events``, a JSON list), from Last-Event-ID on."""
    rt, name = request.app[RUNTIME], request.match_info["name"]
    last = _resume_from(request)
    async with rt.sessions() as session:
        await get_stack(
            session, name, *STATE_ONLY, within=within(request)
        )  # an unknown stack is a 404, not an empty stream
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
    await response.prepare(request)
    closing, loop = request.app[CLOSING], asyncio.get_running_loop()
    deadline = loop.time() + STREAM_LIFETIME
    # The client leaving ends the stream; so does its stack's events becoming unreadable.
    with contextlib.suppress(ConnectionError, ControlError):
        await response.write(b"retry: 2000\n\n")
        while not closing.is_set() and loop.time() < deadline:
            found = await _next_events(request, name, last)
            if found:
                last = found[-1]["id"]
                await response.write(f"id: {last}\nevent: events\ndata: {json.dumps(found)}\n\n".encode())
            else:
                await response.write(b": waiting\n\n")
    return response


def _resume_from(request: web.Request) -> int:
    raw = request.headers.get("Last-Event-ID")
    if raw is None:
        return int_query(request, "after", 0)
    if not raw.isdigit():
        raise BadRequestError("Last-Event-ID: expected an event id", where="Last-Event-ID")
    return int(raw)


async def _next_events(request: web.Request, name: str, last: int) -> list[dict[str, Any]]:
    """Events after *last* (held up to STREAM_WAIT), or none at once when the application stops."""
    rt, closing = request.app[RUNTIME], request.app[CLOSING]
    waiting = asyncio.ensure_future(
        queries.wait_events(
            rt, name, last, STREAM_WAIT, limit=EVENTS_PAGE, nested_depth=1, within=within(request)
        )
    )
    stop = asyncio.ensure_future(closing.wait())
    try:
        await asyncio.wait({waiting, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiting, stop):
            task.cancel()
        await asyncio.gather(waiting, stop, return_exceptions=True)
    return waiting.result() if not waiting.cancelled() else []
