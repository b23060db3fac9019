"""Heat's resource and event routes: list (filters, nested_depth, with_detail), show, metadata, signal,
mark unhealthy; events per stack and per resource (filters, nested_depth, sorting, paging)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from control.api.app_keys import ENGINE, RUNTIME
from control.api.body import read_object
from control.api.heat_v1 import views
from control.api.heat_v1.middleware import (
    bool_param,
    int_param,
    json_response,
    mixed_param,
    refuse_unknown,
    sort_dir,
)
from control.api.heat_v1.stacks import STACK
from control.api.middleware import auth
from control.errors import BadRequestError, NotFoundError
from control.services import stack_events, stack_resources
from control.services.stack_resources import RESOURCE_FILTERS, identified_stack
from control.services.stacks import STATE_ONLY

RESOURCE = STACK + "/resources/{resource_name}"
EVENT_FILTERS = ("resource_status", "resource_action", "resource_name", "resource_type")

routes = web.RouteTableDef()


def _names(request: web.Request) -> tuple[str, str]:
    return request.match_info["stack_name"], request.match_info["stack_id"]


@routes.get(STACK + "/resources")
@auth("project")
async def list_resources(request: web.Request) -> web.Response:
    """The stack's resources, with ``nested_depth`` those of its nested stacks that many levels down after
    the resource that made each (Heat's order); ``with_detail`` adds attributes."""
    refuse_unknown(request, (*RESOURCE_FILTERS, "nested_depth", "with_detail"))
    depth = int_param(request, "nested_depth") or 0
    detail = bool_param(request, "with_detail")
    filters = {k: mixed_param(request, k) for k in RESOURCE_FILTERS}
    async with request.app[RUNTIME].sessions() as session:
        stack = await identified_stack(session, *_names(request))
        found = []
        for owner, row in await stack_resources.resource_tree(session, stack, filters, depth):
            view = views.resource_view(request, owner, row)
            if detail:
                shown = await stack_resources.show_resource(session, owner, row["name"])
                view.update(attributes=shown["attributes"], description=shown["description"])
            found.append(view)
    return json_response({"resources": found})


@routes.get(RESOURCE)
@auth("project")
async def show_resource(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        stack = await identified_stack(session, *_names(request))
        row = await stack_resources.show_resource(session, stack, request.match_info["resource_name"])
        view = views.resource_view(request, stack, row)
    view.update(attributes=row["attributes"], description=row["description"])
    return json_response({"resource": view})


@routes.get(RESOURCE + "/metadata")
@auth("project")
async def resource_metadata(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        stack = await identified_stack(session, *_names(request))
        found = await stack_resources.resource_metadata(session, stack, request.match_info["resource_name"])
    return json_response({"metadata": found})


@routes.post(RESOURCE + "/signal")
@auth("project")
async def signal_resource(request: web.Request) -> web.Response:
    """Heat's resource signal (any JSON body, or none): a deployment's result, with the admin token's authority."""
    raw = await request.read()
    try:
        body: Any = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequestError(f"body: not JSON: {e}", where="body") from e
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    await stack_resources.signal_resource(
        rt, engine.kick, *_names(request), request.match_info["resource_name"], body
    )
    return web.Response(status=200)


@routes.patch(RESOURCE)
@auth("project")
async def mark_unhealthy(request: web.Request) -> web.Response:
    """``{"mark_unhealthy": true|false, "resource_status_reason": "..."}``, as Heat takes it."""
    body = await read_object(request)
    unknown = sorted(set(body) - {"mark_unhealthy", "resource_status_reason"})
    if unknown:
        raise BadRequestError(f"Invalid keys in resource mark unhealthy {unknown}", where=unknown[0])
    if "mark_unhealthy" not in body:
        raise BadRequestError(
            "Missing mandatory (mark_unhealthy) key from mark unhealthy request", where="mark_unhealthy"
        )
    mark = body["mark_unhealthy"]
    if isinstance(mark, str) and mark.lower() in ("true", "false"):
        mark = mark.lower() == "true"
    if not isinstance(mark, bool):
        raise BadRequestError(f'Unrecognized value "{mark}" for "mark_unhealthy"', where="mark_unhealthy")
    reason = str(body.get("resource_status_reason") or "")
    await stack_resources.mark_unhealthy(
        request.app[RUNTIME], *_names(request), request.match_info["resource_name"], mark, reason
    )
    return web.Response(status=200)


# ------------------------------------------------------------------ events


def _event_query(request: web.Request, resource: str | None) -> stack_events.EventQuery:
    filters = {k: mixed_param(request, k) for k in EVENT_FILTERS}
    if resource is not None:
        filters["resource_name"] = [resource]
    return stack_events.EventQuery(
        filters=filters,
        sort_keys=request.query.getall("sort_keys", []),
        sort_dir=sort_dir(request),
        limit=int_param(request, "limit"),
        marker=request.query.get("marker"),
    )


async def _events(
    request: web.Request, resource: str | None, event_id: str | None = None
) -> list[dict[str, Any]]:
    nested = int_param(request, "nested_depth") or 0
    query = _event_query(request, resource)
    async with request.app[RUNTIME].sessions() as session:
        root = await stack_events.event_stack(session, *_names(request))
        stacks = await stack_events.event_stacks(session, root, nested) if nested else [root]
        found = await stack_events.list_events(session, stacks, query)
    if event_id is not None:
        found = [e for e in found if str(e["id"]) == event_id]
    for event in found:
        if nested:  # the root_stack link tells heatclient the server walked the nested stacks
            event["root"] = {"name": root.name, "id": root.id}
    return [views.event_view(request, e, detail=event_id is not None) for e in found]


@routes.get(STACK + "/events")
@auth("project")
async def stack_event_list(request: web.Request) -> web.Response:
    return json_response({"events": await _events(request, None)})


@routes.get(RESOURCE + "/events")
@auth("project")
async def resource_event_list(request: web.Request) -> web.Response:
    resource = request.match_info["resource_name"]
    found = await _events(request, resource)
    if not found:
        raise NotFoundError(f"No events found for resource {resource}", where="resource")
    return json_response({"events": found})


@routes.get(RESOURCE + "/events/{event_id}")
@auth("project")
async def show_event(request: web.Request) -> web.Response:
    event_id = request.match_info["event_id"]
    found = await _events(request, request.match_info["resource_name"], event_id)
    if not found:
        raise NotFoundError(f"No event {event_id} found", where="event")
    return json_response({"event": found[0]})


async def stack_identity(request: web.Request) -> str:
    """The id of the stack the path names (name and id must agree)."""
    async with request.app[RUNTIME].sessions() as session:
        return (await identified_stack(session, *_names(request), *STATE_ONLY)).id
