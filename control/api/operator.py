"""The operator's routes: stacks, deployments, servers (by a token's role and project), keys, imports from media (admin).

The two public routes, liveness and this API's description, live here too: they
are what an operator's tooling asks first.
"""

from __future__ import annotations

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from control.api import ownership
from control.api.app_keys import DEFS, ENGINE, RUNTIME
from control.api.body import read_details, read_object
from control.api.middleware import (
    auth,
    bool_query,
    changes_nothing,
    int_query,
    ok,
    optional_int_query,
    seconds_query,
    time_query,
)
from control.api.openapi import spec
from control.api.ownership import within
from control.errors import BadRequestError
from control.services import (
    abandon,
    converge,
    drift,
    handover,
    plan,
    queries,
    resource_signals,
    signing,
    stacks,
)
from control.services import stack_graph as graph
from control.store.orm import StackRow

routes = web.RouteTableDef()


# ------------------------------------------------------------------ public


@routes.get("/openapi.json")
@auth("public")
async def openapi(request: web.Request) -> web.Response:
    return ok(spec())


@routes.get("/v1/health")
@auth("public")
async def health(request: web.Request) -> web.Response:
    return ok({"status": "ok"})


# ------------------------------------------------------------------ stacks


@routes.post("/v1/stacks")
@auth("write")
async def create_stack(request: web.Request) -> web.Response:
    body = await read_object(request, shared=True)
    rt, kick = request.app[RUNTIME], request.app[ENGINE].kick
    defs = request.app[DEFS]
    return ok(await stacks.create_stack(rt, kick, body, ownership.owner(request), defs), 201)


@routes.get("/v1/stacks")
@auth("read")
async def list_stacks(request: web.Request) -> web.Response:
    """Top-level stacks; ``nested=true`` lists the stacks nested in them too."""
    async with request.app[RUNTIME].sessions() as session:
        return ok(await queries.list_stacks(session, bool_query(request, "nested"), ownership.seen(request)))


@routes.get("/v1/stacks/{name}")
@auth("read")
async def show_stack(request: web.Request) -> web.Response:
    """The stack; with ``summary=true`` its state alone (no resources, no outputs), cheap at any size,
    and with ``progress=true`` too its resources' counts in the running traversal."""
    name = request.match_info["name"]
    progress = bool_query(request, "progress")  # checked even where it changes nothing: bad input is a 400
    async with request.app[RUNTIME].sessions() as session:
        if bool_query(request, "summary"):
            found = await stacks.get_stack(session, name, *stacks.STATE_ONLY, within=within(request))
            view = stacks.stack_view(found)
            if progress:
                # The definition's size: its outline's count (constant), else this process's parse if
                # it has one (never parsed for this), else the rows there are.
                outline, defn = found.outline, request.app[DEFS].cached(found.id, found.version)
                planned = sum(outline["types"].values()) if outline else len(defn.order()) if defn else 0
                view["progress"] = await graph.resource_counts(session, found.id, found.traversal, planned)
            return ok(view)
        # Its template is not decoded.
        stack = await stacks.get_stack(session, name, *stacks.STATE_ONLY, within=within(request))
        view = stacks.stack_view(stack)
        limit = optional_int_query(request, "resources_limit", 1)  # a big stack's first page
        rows = await queries.stack_resources(
            session, stack.id, limit=None if limit is None else limit + 1, within=within(request)
        )
        view["resources"] = rows[:limit]
        if limit is not None:  # whether a next page exists (`GET .../resources?after=` reads it)
            view["resources_more"] = len(rows) > limit
        view["outputs"] = await queries.stack_outputs(
            session, request.app[DEFS], stack.id, within=within(request)
        )
        return ok(view)


@routes.put("/v1/stacks/{name}")
@auth("write")
async def update_stack(request: web.Request) -> web.Response:
    body = await read_object(request, shared=True)
    if "If-Match" in request.headers:
        body["if_match"] = request.headers["If-Match"].strip('"')
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    name, defs = request.match_info["name"], request.app[DEFS]
    return ok(await stacks.update_stack(rt, engine.kick, name, body, within=within(request), defs=defs), 202)


@routes.put("/v1/stacks/{name}/preview")
@changes_nothing
@auth("write")
async def preview_update(request: web.Request) -> web.Response:
    """The plan of the update this body would start (the body of PUT /v1/stacks/NAME); nothing changes."""
    name = request.match_info["name"]

    async def find(session: AsyncSession) -> StackRow:
        return await stacks.get_stack(session, name, within=within(request))

    found = await plan.plan_update(request.app[RUNTIME], await read_object(request, shared=True), find)
    return ok(plan.plan_view(found))


@routes.delete("/v1/stacks/{name}")
@auth("write")
async def delete_stack(request: web.Request) -> web.Response:
    """Start deleting the stack; ``force=true`` skips its DELETE configs (a server that never comes back)."""
    rt, engine, force = request.app[RUNTIME], request.app[ENGINE], bool_query(request, "force")
    return ok(
        await stacks.delete_stack(rt, engine.kick, request.match_info["name"], force, within=within(request)),
        202,
    )


@routes.post("/v1/stacks/{name}/abandon")
@auth("write")
async def abandon_stack(request: web.Request) -> web.Response:
    """The stack's abandon data (Heat's format); the stack is removed and nothing runs on its servers.

    A body ``{to, to_key}`` hands its servers to that control plane (control/services/handover.py).
    """
    target = handover.read_target(await read_details(request))
    return ok(
        await abandon.abandon_stack(
            request.app[RUNTIME], request.match_info["name"], target, within=within(request)
        )
    )


@routes.put("/v1/stacks/{name}/handover")
@auth("write")
async def set_handover(request: web.Request) -> web.Response:
    """``{to, to_key}``: the stack's next abandon (through either API) hands it there; ``{}`` undoes it."""
    target = handover.read_target(await read_object(request))
    return ok(
        await handover.set_target(
            request.app[RUNTIME], request.match_info["name"], target, within=within(request)
        )
    )


@routes.post("/v1/adopt")
@auth("admin")
async def adopt_stack(request: web.Request) -> web.Response:
    """`{name, adopt_stack_data}`: the abandoned stack again, ADOPT_COMPLETE, nothing run."""
    return ok(await abandon.adopt_stack(request.app[RUNTIME], await read_object(request)), 201)


@routes.post("/v1/stacks/{name}/suspend")
@auth("write")
async def suspend_stack(request: web.Request) -> web.Response:
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(
        await stacks.change_stack(
            rt, engine.kick, request.match_info["name"], "SUSPEND", within=within(request)
        ),
        202,
    )


@routes.post("/v1/stacks/{name}/resume")
@auth("write")
async def resume_stack(request: web.Request) -> web.Response:
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(
        await stacks.change_stack(
            rt, engine.kick, request.match_info["name"], "RESUME", within=within(request)
        ),
        202,
    )


@routes.get("/v1/stacks/{name}/outputs")
@auth("read")
async def stack_outputs(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(
            await queries.stack_outputs(
                session, request.app[DEFS], request.match_info["name"], within=within(request)
            )
        )


@routes.get("/v1/stacks/{name}/events")
@auth("read")
async def stack_events(request: web.Request) -> web.Response:
    """Events oldest first after ``after`` (``wait``: held until one comes); ``newest=true``: newest first,
    ``before`` an id for the next page back."""
    after = int_query(request, "after", 0)
    wait = min(seconds_query(request, "wait"), 30.0)
    traversal, limit = optional_int_query(request, "traversal"), optional_int_query(request, "limit", 1)
    name, depth = request.match_info["name"], _nested_depth(request)
    resource, since = request.query.get("resource"), time_query(request, "since")
    newest, before = bool_query(request, "newest"), optional_int_query(request, "before", 1)
    rt = request.app[RUNTIME]
    if newest or before is not None:
        if wait:
            raise BadRequestError(
                "wait: only for events after an id, not with newest or before", where="wait"
            )
        async with rt.sessions() as session:
            found = await queries.stack_events(
                session,
                name,
                after,
                traversal,
                limit,
                depth,
                within=within(request),
                resource=resource,
                since=since,
                newest=newest,
                before=before,
            )
        return ok(found)
    found = await queries.wait_events(
        rt, name, after, wait, traversal, limit, depth, resource=resource, since=since, within=within(request)
    )
    return ok(found)


def _nested_depth(request: web.Request) -> int:
    """``nested_depth=N``: how many levels of nested stacks to include (0: none)."""
    return int_query(request, "nested_depth", 0)


@routes.post("/v1/stacks/{name}/cancel")
@auth("write")
async def cancel_stack(request: web.Request) -> web.Response:
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(await stacks.cancel_stack(rt, engine.kick, request.match_info["name"], within=within(request)))


@routes.get("/v1/stacks/{name}/check")
@auth("read")
async def check_stack(request: web.Request) -> web.Response:
    return ok(await converge.check(request.app[RUNTIME], request.match_info["name"], within=within(request)))


@routes.post("/v1/stacks/{name}/check")
@auth("write")
async def request_checks(request: web.Request) -> web.Response:
    return ok(
        await drift.request(request.app[RUNTIME], request.match_info["name"], within=within(request)), 202
    )


@routes.post("/v1/stacks/{name}/converge")
@auth("write")
async def converge_stack(request: web.Request) -> web.Response:
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(
        await converge.converge(rt, engine.kick, request.match_info["name"], within=within(request)), 202
    )


@routes.get("/v1/stacks/{name}/resources")
@auth("read")
async def stack_resources(request: web.Request) -> web.Response:
    depth, limit = _nested_depth(request), optional_int_query(request, "limit", 1)
    after = int_query(request, "after", 0)
    async with request.app[RUNTIME].sessions() as session:
        return ok(
            await queries.stack_resources(
                session, request.match_info["name"], depth, limit, after, within=within(request)
            )
        )


@routes.get("/v1/stacks/{name}/graph")
@auth("read")
async def stack_graph(request: web.Request) -> web.Response:
    """The stack's resources with their state and the edges between them (why each needs another)."""
    async with request.app[RUNTIME].sessions() as session:
        return ok(
            await graph.stack_graph(
                session, request.app[DEFS], request.match_info["name"], within=within(request)
            )
        )


@routes.post("/v1/stacks/{name}/resources/{resource}/signal")
@auth("write")
async def signal_resource(request: web.Request) -> web.Response:
    """Signal one resource of the stack (Heat's resource signal): a scaling policy adjusts its group."""
    details = await read_details(request)
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    name, resource = request.match_info["name"], request.match_info["resource"]
    return ok(
        await resource_signals.signal_resource(
            rt, engine.kick, name, resource, details, within=within(request)
        )
    )


@routes.get("/v1/stacks/{name}/failures")
@auth("read")
async def stack_failures(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await queries.stack_failures(session, request.match_info["name"], within=within(request)))


# ------------------------------------------------------------------ signing key


@routes.get("/v1/keys")
@auth("admin")
async def show_key(request: web.Request) -> web.Response:
    return ok(signing.key_view(request.app[RUNTIME]))


@routes.post("/v1/keys/rotate")
@auth("admin")
async def rotate_key(request: web.Request) -> web.Response:
    return ok(await signing.rotate(request.app[RUNTIME]), 201)
