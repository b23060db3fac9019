"""The web view's two controls that change something: converge a stack, cancel its deployments.

Policy ``ui-write``: a session of a member or an admin, in the stack's project, whose request
carries the session's form token in ``X-Anneal-Form`` (the middleware checks all three; a
reader's session gets 403). The cookie is SameSite=Strict and the token is readable only by
this site's own pages, so another site can make a browser send neither.
"""

from __future__ import annotations

from aiohttp import web

from control.api.app_keys import ENGINE, RUNTIME
from control.api.middleware import auth, ok
from control.api.ownership import within
from control.services import converge, stacks

routes = web.RouteTableDef()


@routes.post("/ui/api/stacks/{name}/converge")
@auth("ui-write")
async def converge_stack(request: web.Request) -> web.Response:
    """As `anneal stack converge NAME`."""
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(
        await converge.converge(rt, engine.kick, request.match_info["name"], within=within(request)), 202
    )


@routes.post("/ui/api/stacks/{name}/cancel")
@auth("ui-write")
async def cancel_stack(request: web.Request) -> web.Response:
    """As `anneal stack cancel NAME`."""
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    return ok(await stacks.cancel_stack(rt, engine.kick, request.match_info["name"], within=within(request)))
