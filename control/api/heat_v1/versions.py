"""Heat's version document at the API's root, and build_info."""

from __future__ import annotations

from importlib.metadata import version

from aiohttp import web

from control.api.heat_v1.middleware import json_response
from control.api.middleware import auth

routes = web.RouteTableDef()


@routes.get("/")
@auth("public")
async def versions(request: web.Request) -> web.Response:
    """What Heat's root answers (300 Multiple Choices): the one version, v1.0, CURRENT."""
    href = f"{request.url.origin()}/v1/"
    body = {"versions": [{"id": "v1.0", "status": "CURRENT", "links": [{"rel": "self", "href": href}]}]}
    return json_response(body, 300)


@routes.get("/v1/{project_id}/build_info")
@auth("project")
async def build_info(request: web.Request) -> web.Response:
    revision = f"anneal {version('anneal')}"
    return json_response({"api": {"revision": revision}, "engine": {"revision": revision}})
