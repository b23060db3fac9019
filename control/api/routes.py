"""The REST API: routes, default-deny authentication, errors as JSON.

Every route declares who may call it (``public``, ``admin``, ``agent``,
``signal``); a route without a declaration answers 403. Domain errors become
``{"error": {"code", "message", "where"}}`` with their HTTP status.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm.exc import StaleDataError

from agent import wire
from control import hot
from control.api.app_keys import DEFS, ENGINE, RUNTIME
from control.api.openapi import spec
from control.documents import heat
from control.engine import lifecycle
from control.errors import AuthError, BadRequestError, ControlError, ForbiddenError, TooLargeError
from control.services import agents, converge, queries, signing, stacks
from control.store.orm import ServerRow, StackRow
from control.transports import offline as offline_enrolment
from control.transports import service as transport_service
from control.transports.publisher import http_publisher
from control.transports.store import parse_signal_name

log = logging.getLogger(__name__)
routes = web.RouteTableDef()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
AUTH_SERVER = "anneal.server_id"


def auth(policy: str) -> Callable[[Handler], Handler]:
    """Declare who may call a route: public, admin, agent or signal."""

    def mark(handler: Handler) -> Handler:
        handler.anneal_auth = policy  # type: ignore[attr-defined]
        return handler

    return mark


def error_body(status: int, code: str, message: str, where: str | None) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message, "where": where}}, status=status)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:  # noqa: PLR0911
    """Turn every failure into a JSON error; only a bug gives a 500."""
    try:
        return await handler(request)
    except ControlError as e:
        return error_body(e.status, e.code, e.message, e.where)
    except hot.TemplateError as e:
        return error_body(400, "invalid_template", str(e), e.path)
    except web.HTTPRequestEntityTooLarge:
        cap = request.app[RUNTIME].settings.request_cap
        return error_body(413, "too_large", f"request body is over the cap of {cap} bytes", "body")
    except IntegrityError as e:
        log.info("conflicting write on %s %s: %s", request.method, request.path, e)
        return error_body(409, "conflict", "the request conflicts with a concurrent change", None)
    except (OperationalError, StaleDataError) as e:
        log.warning("database unavailable on %s %s: %s", request.method, request.path, e)
        response = error_body(503, "unavailable", "busy or raced a concurrent change; retry later", None)
        response.headers["Retry-After"] = "5"
        return response
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return error_body(e.status, "http", e.reason, request.path)
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_body(500, "internal", "internal error; see the control plane's log", None)


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Default deny: each route names its policy; nothing else gets through."""
    route_handler = request.match_info.route.handler
    policy = getattr(route_handler, "anneal_auth", None)
    if request.match_info.http_exception is not None or policy == "public":
        return await handler(request)
    token = _bearer(request)
    rt = request.app[RUNTIME]
    if policy == "admin":
        if token is None or not hmac.compare_digest(token, rt.keys.admin_token):
            raise AuthError("this route needs the admin token", where="Authorization")
    elif policy in ("agent", "signal"):
        if token is not None:
            request[AUTH_SERVER] = await agents.authenticate(rt, token)
        elif policy == "agent" or "sig" not in request.query:
            raise AuthError("this route needs the agent's credential", where="Authorization")
    else:
        raise ForbiddenError("route has no access policy", where=request.path)
    return await handler(request)


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def read_json(request: web.Request, cap: int | None = None) -> Any:
    raw = await request.read()
    if cap is not None and len(raw) > cap:
        raise TooLargeError(f"body is {len(raw)} bytes, over the cap of {cap} bytes", where="body")
    if not raw:
        raise BadRequestError("body: a JSON object is required", where="body")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequestError(f"body: not JSON: {e}", where="body") from e


def ok(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


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
@auth("admin")
async def create_stack(request: web.Request) -> web.Response:
    body = await read_json(request)
    if not isinstance(body, dict):
        raise BadRequestError("body: expected an object", where="body")
    return ok(await stacks.create_stack(request.app[RUNTIME], request.app[ENGINE].kick, body), 201)


@routes.get("/v1/stacks")
@auth("admin")
async def list_stacks(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        rows = await session.scalars(select(StackRow).order_by(StackRow.created_at))
        return ok([stacks.stack_view(s) for s in rows])


@routes.get("/v1/stacks/{name}")
@auth("admin")
async def show_stack(request: web.Request) -> web.Response:
    """The stack; with ``summary=true`` its state alone (no resources, no outputs), cheap at any size."""
    name = request.match_info["name"]
    async with request.app[RUNTIME].sessions() as session:
        if _bool_query(request, "summary"):
            return ok(stacks.stack_view(await stacks.get_stack(session, name, *stacks.STATE_ONLY)))
        stack = await stacks.get_stack(session, name)
        view = stacks.stack_view(stack)
        view["resources"] = await queries.stack_resources(session, stack.id)
        view["outputs"] = await queries.stack_outputs(session, request.app[DEFS], stack.id)
        return ok(view)


@routes.put("/v1/stacks/{name}")
@auth("admin")
async def update_stack(request: web.Request) -> web.Response:
    body = await read_json(request)
    if not isinstance(body, dict):
        raise BadRequestError("body: expected an object", where="body")
    if "If-Match" in request.headers:
        body["if_match"] = request.headers["If-Match"].strip('"')
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(await stacks.update_stack(rt, engine.kick, request.match_info["name"], body), 202)


@routes.delete("/v1/stacks/{name}")
@auth("admin")
async def delete_stack(request: web.Request) -> web.Response:
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(await stacks.delete_stack(rt, engine.kick, request.match_info["name"]), 202)


@routes.post("/v1/stacks/{name}/suspend")
@auth("admin")
async def suspend_stack(request: web.Request) -> web.Response:
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(await lifecycle.change_stack(rt, engine.kick, request.match_info["name"], "SUSPEND"), 202)


@routes.post("/v1/stacks/{name}/resume")
@auth("admin")
async def resume_stack(request: web.Request) -> web.Response:
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(await lifecycle.change_stack(rt, engine.kick, request.match_info["name"], "RESUME"), 202)


@routes.get("/v1/stacks/{name}/outputs")
@auth("admin")
async def stack_outputs(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await queries.stack_outputs(session, request.app[DEFS], request.match_info["name"]))


@routes.get("/v1/stacks/{name}/events")
@auth("admin")
async def stack_events(request: web.Request) -> web.Response:
    after = _int_query(request, "after", 0)
    wait = min(_float_query(request, "wait"), 30.0)
    traversal, limit = _optional_int(request, "traversal"), _optional_int(request, "limit")
    if limit is not None and limit < 1:
        raise BadRequestError(f"limit: expected 1 or more, got {limit}", where="limit")
    name = request.match_info["name"]
    return ok(await queries.wait_events(request.app[RUNTIME], name, after, wait, traversal, limit))


@routes.post("/v1/stacks/{name}/cancel")
@auth("admin")
async def cancel_stack(request: web.Request) -> web.Response:
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(await stacks.cancel_stack(rt, engine.kick, request.match_info["name"]))


@routes.get("/v1/stacks/{name}/check")
@auth("admin")
async def check_stack(request: web.Request) -> web.Response:
    return ok(await converge.check(request.app[RUNTIME], request.match_info["name"]))


@routes.post("/v1/stacks/{name}/converge")
@auth("admin")
async def converge_stack(request: web.Request) -> web.Response:
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(await converge.converge(rt, engine.kick, request.match_info["name"]), 202)


@routes.get("/v1/stacks/{name}/resources")
@auth("admin")
async def stack_resources(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await queries.stack_resources(session, request.match_info["name"]))


@routes.get("/v1/stacks/{name}/failures")
@auth("admin")
async def stack_failures(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await queries.stack_failures(session, request.match_info["name"]))


def _int_query(request: web.Request, name: str, default: int) -> int:
    found = _optional_int(request, name)
    return default if found is None else found


def _optional_int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError as e:
        raise BadRequestError(f"{name}: expected an integer, got {raw!r}", where=name) from e


# ------------------------------------------------------------------ deployments and servers


@routes.get("/v1/deployments")
@auth("admin")
async def list_deployments(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await queries.list_deployments(session, request.query))


@routes.get("/v1/deployments/{id}")
@auth("admin")
async def show_deployment(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        return ok(await queries.show_deployment(session, request.match_info["id"]))


@routes.post("/v1/servers")
@auth("admin")
async def create_server(request: web.Request) -> web.Response:
    body = await read_json(request)
    name = body.get("name") if isinstance(body, dict) else None
    transport = body.get("transport") if isinstance(body, dict) else None
    heat = body.get("heat_compatible", False) if isinstance(body, dict) else False
    return ok(await agents.create_server_record(request.app[RUNTIME], name, transport, heat), 201)


@routes.patch("/v1/servers/{name}")
@auth("admin")
async def update_server(request: web.Request) -> web.Response:
    """Change a server's transport; its agent moves once it reads the document naming it."""
    body = await read_json(request)
    if not isinstance(body, dict) or "transport" not in body:
        raise BadRequestError("body: expected an object with transport", where="body")
    return ok(await agents.set_transport(request.app[RUNTIME], request.match_info["name"], body["transport"]))


@routes.post("/v1/signals/import")
@auth("admin")
async def import_signal(request: web.Request) -> web.Response:
    """A signal carried back on removable media (`anneal signal import DIR`)."""
    body = await read_json(request, wire.MAX_SIGNAL_BYTES + 64 * 1024)
    if not isinstance(body, dict):
        raise BadRequestError("body: expected an object", where="body")
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


@routes.post("/v1/servers/{name}/media")
@auth("admin")
async def server_media(request: web.Request) -> web.Response:
    """An offline enrolment bundle for a LOCAL server's media (`anneal server media NAME DIR`)."""
    return ok(await offline_enrolment.media_bundle(request.app[RUNTIME], request.match_info["name"]), 201)


@routes.post("/v1/enrolments/import")
@auth("admin")
async def import_enrolment(request: web.Request) -> web.Response:
    """An agent's enrolment request carried back on media (`anneal signal import DIR`)."""
    body = await read_json(request, 64 * 1024)
    return ok(await offline_enrolment.import_enrolment(request.app[RUNTIME], body))


@routes.post("/v1/servers/{name}/token")
@auth("admin")
async def server_token(request: web.Request) -> web.Response:
    return ok(await agents.issue_token(request.app[RUNTIME], request.match_info["name"]), 201)


@routes.get("/v1/servers")
@auth("admin")
async def list_servers(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    async with rt.sessions() as session:
        rows = await session.scalars(select(ServerRow).order_by(ServerRow.name))
        return ok([queries.server_view(s, rt.settings) for s in rows])


@routes.get("/v1/servers/{name}")
@auth("admin")
async def show_server(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    async with rt.sessions() as session:
        server = await queries.get_server(session, request.match_info["name"])
        view = queries.server_view(server, rt.settings)
        if server.agent_kind == heat.HEAT_AGENT:
            view.update(heat.heat_view(rt, server))
        view["deployments"] = await queries.list_deployments(session, {"server": server.id})
        return ok(view)


# ------------------------------------------------------------------ signing key


@routes.get("/v1/keys")
@auth("admin")
async def show_key(request: web.Request) -> web.Response:
    return ok(signing.key_view(request.app[RUNTIME]))


@routes.post("/v1/keys/rotate")
@auth("admin")
async def rotate_key(request: web.Request) -> web.Response:
    return ok(await signing.rotate(request.app[RUNTIME]), 201)


# ------------------------------------------------------------------ agents


@routes.post("/v1/agent/enrol")
@auth("public")  # the one-time token in the body is the credential
async def enrol(request: web.Request) -> web.Response:
    body = await read_json(request, 64 * 1024)
    if not isinstance(body, dict):
        raise BadRequestError("body: expected an object", where="body")
    return ok(await agents.enrol(request.app[RUNTIME], body), 201)


@routes.get("/v1/agent/document")
@auth("agent")
async def document(request: web.Request) -> web.StreamResponse:
    """The server's document; 304 while unchanged; ``?wait=S`` long-polls up to S seconds."""
    rt = request.app[RUNTIME]
    server_id = request[AUTH_SERVER]
    publisher = http_publisher(rt.publisher)
    if publisher is None:
        raise BadRequestError("this control plane does not serve documents over HTTP", where="transport")
    if publisher.get(server_id) is None:
        await rt.publish([server_id])
    etag = request.headers.get("If-None-Match", "")
    wait = min(_float_query(request, "wait"), rt.settings.long_poll_max)
    doc = publisher.get(server_id)
    if doc is not None and doc.etag == etag and wait > 0:
        doc = await publisher.wait_newer(server_id, etag, wait) or doc
    if doc is None:
        raise BadRequestError("no document for this server", where="server")
    if doc.etag == etag:
        return web.Response(status=304, headers={"ETag": doc.etag})
    return web.Response(body=doc.body, content_type="application/json", headers={"ETag": doc.etag})


def _bool_query(request: web.Request, name: str) -> bool:
    raw = request.query.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise BadRequestError(f"{name}: expected true or false, got {raw!r}", where=name)
    return raw in ("true", "1")


def _float_query(request: web.Request, name: str) -> float:
    raw = request.query.get(name, "0")
    try:
        value = float(raw)
    except ValueError as e:
        raise BadRequestError(f"{name}: expected seconds, got {raw!r}", where=name) from e
    return max(0.0, value)


@routes.post("/v1/agent/heartbeat")
@auth("agent")
async def heartbeat(request: web.Request) -> web.Response:
    body = await read_json(request, 64 * 1024)
    if not isinstance(body, dict):
        raise BadRequestError("body: expected an object", where="body")
    return ok(await agents.heartbeat(request.app[RUNTIME], request[AUTH_SERVER], body))


@routes.get("/v1/heat/metadata/{server_id}")
@auth("signal")  # the URL's signature: Heat's os-collect-config `request` collector polls it
async def heat_metadata(request: web.Request) -> web.Response:
    """A Heat-compatible server's document (HEAD too), with Last-Modified as Swift would send."""
    body, etag, modified = await heat.metadata(
        request.app[RUNTIME], request.match_info["server_id"], request.query.get("sig")
    )
    headers = {"ETag": etag, "Last-Modified": modified}
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type="application/json", headers=headers)


@routes.post("/v1/signal/{deployment_id}/{generation}")
@auth("signal")  # the URL's signature, or the agent's own credential
async def signal(request: web.Request) -> web.Response:
    body = await read_json(request, wire.MAX_SIGNAL_BYTES)
    try:
        generation = int(request.match_info["generation"])
    except ValueError as e:
        raise BadRequestError("generation: expected an integer", where="generation") from e
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    result = await agents.record_signal(
        rt,
        engine.kick,
        request.match_info["deployment_id"],
        generation,
        body,
        sig=request.query.get("sig"),
        server_id=request.get(AUTH_SERVER),
    )
    return ok(result)
