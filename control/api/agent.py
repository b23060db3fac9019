"""What agents call: enrolment, their document, heartbeats, and signals (/v1/agent/*, /v1/signal/*)."""

from __future__ import annotations

from aiohttp import web

from agent import wire_caps
from control.api.app_keys import ENGINE, RUNTIME
from control.api.body import read_details, read_json, read_object
from control.api.middleware import AUTH_CREDENTIAL, AUTH_SERVER, MAX_INT, auth, ok, seconds_query
from control.documents.publish import HttpPublisher, Published
from control.errors import AuthError, BadRequestError, ForbiddenError
from control.principal import IDS_ONLY
from control.services import agents, alive, resource_signals
from control.transports.publisher import http_publisher

routes = web.RouteTableDef()


@routes.post("/v1/agent/enrol")
@auth("public")  # the one-time token in the body is the credential
async def enrol(request: web.Request) -> web.Response:
    body = await read_object(request, 64 * 1024)
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
    alive.polled(rt, server_id)  # the poll is the agent's heartbeat too
    if publisher.etag(server_id) is None:  # not rendered by this process yet: nothing changed
        await rt.publish([server_id], announce=False)
    etag = request.headers.get("If-None-Match", "")
    wait = min(seconds_query(request, "wait"), rt.settings.long_poll_max)
    if publisher.etag(server_id) == etag and wait > 0:
        with publisher.answering(server_id):  # until its response: the engine lets it answer first
            return await _long_poll(request, publisher, server_id, etag, wait)
    if publisher.etag(server_id) is None:
        raise BadRequestError("no document for this server", where="server")
    if publisher.etag(server_id) == etag:  # unchanged: the serial alone answers, not the bytes
        return web.Response(status=304, headers={"ETag": etag})
    doc = publisher.get(server_id)
    if doc is None:  # its bytes left the publisher's cache: rendered again from the database
        await rt.publish([server_id], announce=False)
        doc = publisher.get(server_id)
    if doc is None:
        raise BadRequestError("no document for this server", where="server")
    return _document(doc)


async def _long_poll(
    request: web.Request, publisher: HttpPublisher, server_id: str, etag: str, wait: float
) -> web.Response:
    """The new document once published (within *wait* s), else 304."""
    rt = request.app[RUNTIME]
    with rt.metrics.long_polls.track_inprogress():
        newer = await publisher.wait_newer(server_id, etag, wait)
    # The credential may have been revoked while the request waited (e.g. the agent enrolled
    # again), and the change that woke it may be that very revocation: a new document is
    # handed over only to a credential the database holds now, not one cached a moment ago.
    if newer is not None:
        await agents.check_still_held(rt, server_id, request[AUTH_CREDENTIAL], newer.at)
        return _document(newer)
    await agents.authenticate(rt, request[AUTH_CREDENTIAL])
    return web.Response(status=304, headers={"ETag": etag})


def _document(doc: Published) -> web.Response:
    return web.Response(body=doc.body, content_type="application/json", headers={"ETag": doc.etag})


@routes.post("/v1/agent/heartbeat")
@auth("agent")
async def heartbeat(request: web.Request) -> web.Response:
    body = await read_object(request, 64 * 1024)
    rt = request.app[RUNTIME]
    return ok(await agents.heartbeat(rt, request[AUTH_SERVER], request[AUTH_CREDENTIAL], body))


@routes.post("/v1/signal/{deployment_id}/{generation}")
@auth("signal")  # the URL's signature, or the agent's own credential
async def signal(request: web.Request) -> web.Response:
    """A deployment's result; the credential is checked before a byte of the body is read."""
    deployment_id, generation = request.match_info["deployment_id"], _generation(request)
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    sig, server_id = request.query.get("sig"), request.get(AUTH_SERVER)
    agents.check_signal_credential(rt, deployment_id, generation, sig, server_id)
    body = await read_json(request, wire_caps.MAX_SIGNAL_BYTES)
    result = await agents.record_signal(
        rt,
        engine.kick,
        deployment_id,
        generation,
        body,
        sig=sig,
        server_id=server_id,
        credential=request.get(AUTH_CREDENTIAL),
    )
    return ok(result)


@routes.post("/v1/resource-signal/{stack_id}/{resource}")
@auth("signal")  # the URL's signature: a scaling policy's signal_url / alarm_url
async def resource_signal(request: web.Request) -> web.Response:
    """Signal one resource (a scaling policy) with its URL, e.g. `curl -X POST '<signal_url>'`."""
    sig = request.query.get("sig")
    if sig is None:
        raise ForbiddenError("a resource is signalled with its URL's signature (sig)", where="sig")
    details = await read_details(request)
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    stack, resource = request.match_info["stack_id"], request.match_info["resource"]
    return ok(
        await resource_signals.signal_resource(
            rt, engine.kick, stack, resource, details, sig=sig, within=IDS_ONLY
        )
    )


@routes.put("/v1/signal/{deployment_id}/{generation}")
@auth("public")  # the URL's own TempURL capability, checked here: a CFN_SIGNAL sig does not open it
async def signal_put(request: web.Request) -> web.Response:
    """TEMP_URL_SIGNAL without Swift: the result PUT to a URL that stands in for a TempURL.

    The URL's capability is checked before a byte of the body is read."""
    deployment_id, generation = request.match_info["deployment_id"], _generation(request)
    rt = request.app[RUNTIME]
    given = request.query.get("sig")
    if not given:
        raise AuthError("a TempURL signal needs its URL's sig", where="sig")
    if not given.isascii() or not rt.keys.check_capability(
        "temp-url-signal", f"{deployment_id}:{generation}", given
    ):
        raise ForbiddenError("signal signature does not match this deployment and generation", where="sig")
    body = await read_json(request, wire_caps.MAX_SIGNAL_BYTES)
    sig = rt.keys.signal_signature(deployment_id, generation)  # what a POST to this generation carries
    result = await agents.record_signal(
        rt, request.app[ENGINE].kick, deployment_id, generation, body, sig=sig, server_id=None
    )
    return ok(result)


def _generation(request: web.Request) -> int:
    """The URL's generation: an integer from 0 to MAX_INT, else 400 naming it."""
    raw = request.match_info["generation"]
    generation = int(raw) if raw.isdigit() and raw.isascii() and len(raw) < 12 else -1
    if not 0 <= generation <= MAX_INT:
        raise BadRequestError(f"generation: expected an integer from 0 to {MAX_INT}", where="generation")
    return generation
