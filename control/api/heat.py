"""What Heat's own agents and templates call: metadata, Keystone, the Heat API, heat-api-cfn, wait handles.

Every route here is ``public`` to the middleware and checks its own credential, each of
one kind (``control/documents/heatauth.py``): the metadata URL's ``sig``, a Keystone
password or token minted for one server, deployment or handle, an EC2 signature, a
wait handle's token. None of them is the admin token or an agent credential.
"""

from __future__ import annotations

import json

from aiohttp import web

from agent import wire_caps
from control.api.app_keys import ENGINE, RUNTIME
from control.api.middleware import auth, ok
from control.documents import heat
from control.errors import AuthError, BadRequestError, TooLargeError
from control.services import heatapi
from control.signals.waits import check_handle_credential, record_wait_signal

routes = web.RouteTableDef()
_STACK = "/v1/heat/orchestration/v1/{project}/stacks/{stack_name}/{stack_id}/resources/{resource}"


async def _body(request: web.Request) -> object:
    """The JSON body; empty is {} (Heat's signals may carry nothing)."""
    raw = await request.read()
    if len(raw) > wire_caps.MAX_SIGNAL_BYTES:
        raise TooLargeError(f"body is over the cap of {wire_caps.MAX_SIGNAL_BYTES} bytes", where="body")
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequestError(f"body: not JSON: {e}", where="body") from e


@routes.get("/v1/heat/metadata/{server_id}")
@auth("public")  # the URL's sig is the credential
async def heat_metadata(request: web.Request) -> web.Response:
    """A Heat-compatible server's document (HEAD too), with Last-Modified as Swift would send."""
    rt, server_id = request.app[RUNTIME], request.match_info["server_id"]
    if "sig" not in request.query:
        raise AuthError("the metadata URL needs its sig", where="sig")
    heat.check_metadata_signature(rt, server_id, request.query.get("sig"))
    doc, etag, modified = await heat.metadata(rt, server_id)
    headers = {"ETag": etag, "Last-Modified": modified}
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers=headers)
    return web.json_response(doc, headers=headers)


@routes.get("/v1/heat/cfn/v1/")
@auth("public")  # an EC2 signature by the server's own key
async def cfn(request: web.Request) -> web.Response:
    """heat-api-cfn's DescribeStackResource: the server's document in ``Metadata``."""
    rt = request.app[RUNTIME]
    hosts = tuple(dict.fromkeys((request.host, rt.settings.base_url.partition("://")[2].split("/")[0])))
    text = await heatapi.describe_stack_resource(rt, "GET", hosts, request.path, dict(request.query))
    return web.Response(text=text, content_type="application/xml")


@routes.get("/v1/heat/keystone")
@auth("public")
async def keystone_versions(request: web.Request) -> web.Response:
    version = heatapi.version(request.app[RUNTIME].settings.base_url)
    return web.json_response({"versions": {"values": [version]}}, status=300)


@routes.get("/v1/heat/keystone/v3")
@routes.get("/v1/heat/keystone/v3/")
@auth("public")
async def keystone_v3(request: web.Request) -> web.Response:
    return ok({"version": heatapi.version(request.app[RUNTIME].settings.base_url)})


@routes.post("/v1/heat/keystone/v3/auth/tokens")
@auth("public")  # the password in the body is the credential
async def keystone_login(request: web.Request) -> web.Response:
    token, body = await heatapi.login(request.app[RUNTIME], await _body(request))
    return web.json_response(body, status=201, headers={"X-Subject-Token": token})


@routes.get(_STACK + "/metadata")
@auth("public")  # a server user's token
async def resource_metadata(request: web.Request) -> web.Response:
    return ok(await heatapi.resource_metadata(request.app[RUNTIME], request.headers.get("X-Auth-Token")))


@routes.post(_STACK + "/signal")
@auth("public")  # a deployment's or a handle's token
async def resource_signal(request: web.Request) -> web.Response:
    result = await heatapi.resource_signal(
        request.app[RUNTIME],
        request.app[ENGINE].kick,
        request.headers.get("X-Auth-Token"),
        request.match_info["stack_id"],
        await _body(request),
    )
    return ok(result)


@routes.put("/v1/heat/waitcondition/{handle_id}")
@routes.post("/v1/heat/waitcondition/{handle_id}")
@auth("public")  # the handle's token, or the URL's sig
async def wait_signal(request: web.Request) -> web.Response:
    """A signal to a wait condition handle, as its ``curl_cli`` or a pre-signed URL sends it."""
    rt, handle_id = request.app[RUNTIME], request.match_info["handle_id"]
    check_handle_credential(rt, handle_id, request.headers.get("X-Auth-Token"), request.query.get("sig"))
    return ok(await record_wait_signal(rt, request.app[ENGINE].kick, handle_id, await _body(request)))
