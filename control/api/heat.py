"""What Heat's own agent chain polls: os-collect-config's `request` collector (/v1/heat/metadata)."""

from __future__ import annotations

from aiohttp import web

from control.api.app_keys import RUNTIME
from control.api.middleware import auth
from control.documents.heat import metadata

routes = web.RouteTableDef()


@routes.get("/v1/heat/metadata/{server_id}")
@auth("signal")  # the URL's signature is the credential
async def heat_metadata(request: web.Request) -> web.Response:
    """A Heat-compatible server's document (HEAD too), with Last-Modified as Swift would send."""
    body, etag, modified = await metadata(
        request.app[RUNTIME], request.match_info["server_id"], request.query.get("sig")
    )
    headers = {"ETag": etag, "Last-Modified": modified}
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type="application/json", headers=headers)
