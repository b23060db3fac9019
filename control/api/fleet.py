"""The operator's routes for deployments and servers (by a token's role and project), and what agents
carry back on removable media (admin)."""

from __future__ import annotations

from aiohttp import web
from sqlalchemy import select

from agent import wire_caps
from control.api import ownership
from control.api.app_keys import ENGINE, RUNTIME
from control.api.body import read_json, read_object
from control.api.middleware import auth, bool_query, ok, optional_int_query
from control.api.ownership import within
from control.documents import heat
from control.errors import BadRequestError
from control.services import agents, queries, servers
from control.store.orm import ServerRow
from control.transports import offline as offline_enrolment
from control.transports import service as transport_service
from control.transports.store import parse_signal_name

routes = web.RouteTableDef()


# ------------------------------------------------------------------ deployments and servers


@routes.get("/v1/deployments")
@auth("read")
async def list_deployments(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        limit = optional_int_query(request, "limit", 1)
        return ok(await queries.list_deployments(session, request.query, ownership.seen(request), limit))


@routes.get("/v1/deployments/{id}")
@auth("read")
async def show_deployment(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await queries.show_deployment(session, request.match_info["id"], within=within(request)))


@routes.post("/v1/servers")
@auth("write")
async def create_server(request: web.Request) -> web.Response:
    body = await read_json(request)
    name = body.get("name") if isinstance(body, dict) else None
    transport = body.get("transport") if isinstance(body, dict) else None
    heat = body.get("heat_compatible", False) if isinstance(body, dict) else False
    rt, project = request.app[RUNTIME], ownership.owner(request)
    return ok(await agents.create_server_record(rt, name, transport, heat, project), 201)


@routes.patch("/v1/servers/{name}")
@auth("write")
async def update_server(request: web.Request) -> web.Response:
    """Change a server's transport; its agent moves once it reads the document naming it."""
    body = await read_json(request)
    if not isinstance(body, dict) or "transport" not in body:
        raise BadRequestError("body: expected an object with transport", where="body")
    return ok(
        await agents.set_transport(
            request.app[RUNTIME], request.match_info["name"], body["transport"], within=within(request)
        )
    )


@routes.delete("/v1/servers/{name}")
@auth("write")
async def delete_server(request: web.Request) -> web.Response:
    """Delete a server; 409 naming the stacks that use it unless ``force=true`` releases it."""
    rt, engine, force = request.app[RUNTIME], request.app[ENGINE], bool_query(request, "force")
    return ok(
        await servers.delete_server(
            rt, engine.kick, request.match_info["name"], force, within=within(request)
        )
    )


@routes.post("/v1/servers/{name}/media")
@auth("write")
async def server_media(request: web.Request) -> web.Response:
    """An offline enrolment bundle for a LOCAL server's media (`anneal server media NAME DIR`)."""
    return ok(
        await offline_enrolment.media_bundle(
            request.app[RUNTIME], request.match_info["name"], within=within(request)
        ),
        201,
    )


@routes.post("/v1/servers/{name}/token")
@auth("write")
async def server_token(request: web.Request) -> web.Response:
    return ok(
        await agents.issue_token(request.app[RUNTIME], request.match_info["name"], within=within(request)),
        201,
    )


@routes.get("/v1/servers")
@auth("read")
async def list_servers(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    async with rt.sessions() as session:
        query = select(ServerRow).order_by(ServerRow.name)
        if (project := ownership.seen(request)) is not None:
            query = query.where(ServerRow.project == project)
        rows = await session.scalars(query)
        return ok([servers.server_view(s, rt.settings) for s in rows])


@routes.get("/v1/servers/{name}")
@auth("read")
async def show_server(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    async with rt.sessions() as session:
        server = await servers.get_server(session, request.match_info["name"], within=within(request))
        view = servers.server_view(server, rt.settings)
        if server.agent_kind == heat.HEAT_AGENT:
            view.update(heat.heat_view(rt, server))
        view["deployments"] = await queries.list_deployments(session, {"server": server.id})
        return ok(view)


# ------------------------------------------------------------------ carried back on media


@routes.post("/v1/signals/import")
@auth("admin")
async def import_signal(request: web.Request) -> web.Response:
    """A signal carried back on removable media (`anneal signal import DIR`)."""
    body = await read_object(request, wire_caps.MAX_SIGNAL_BYTES + 64 * 1024)
    name, signal = body.get("name"), body.get("signal")
    parsed = parse_signal_name(name) if isinstance(name, str) else None
    if parsed is None:
        raise BadRequestError(f"name: expected <deployment id>/<generation>, got {name!r}", where="name")
    if not isinstance(signal, str):
        raise BadRequestError("signal: expected the signal file's text", where="signal")
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    result = await transport_service.import_signal(
        rt, engine.kick, parsed[0], parsed[1], signal.encode(), via="LOCAL"
    )
    return ok(result)


@routes.post("/v1/enrolments/import")
@auth("admin")
async def import_enrolment(request: web.Request) -> web.Response:
    """An agent's enrolment request carried back on media (`anneal signal import DIR`)."""
    body = await read_json(request, 64 * 1024)
    return ok(await offline_enrolment.import_enrolment(request.app[RUNTIME], body))
