"""Heat's software config and software deployment routes (heat/api/openstack/v1/software_*.py)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from control.api.app_keys import RUNTIME
from control.api.body import read_object
from control.api.heat_v1.middleware import bool_param, int_param, json_response, scope, seen, within
from control.api.heat_v1.views import isotime
from control.api.middleware import auth
from control.errors import NotFoundError
from control.services import configs, deployments
from control.services.servers import get_server
from control.services.stack_resources import server_items

P = "/v1/{project_id}"
CONFIGS = P + "/software_configs"
DEPLOYMENTS = P + "/software_deployments"

routes = web.RouteTableDef()


def _config(found: dict[str, Any]) -> dict[str, Any]:
    return {**found, "creation_time": isotime(found["creation_time"])}


def _deployment(found: dict[str, Any]) -> dict[str, Any]:
    return {
        **found,
        "creation_time": isotime(found["creation_time"]),
        "updated_time": isotime(found["updated_time"]),
    }


@routes.get(CONFIGS)
@auth("project")
async def list_configs(request: web.Request) -> web.Response:
    """Configs (``limit``, ``marker``), oldest first; ``global_tenant`` is accepted."""
    bool_param(request, "global_tenant")
    async with request.app[RUNTIME].sessions() as session:
        limit, marker = int_param(request, "limit"), request.query.get("marker")
        found = await configs.list_configs(session, limit, marker, seen(request))
    return json_response({"software_configs": [_config(c) for c in found]})


@routes.post(CONFIGS)
@auth("project")
async def create_config(request: web.Request) -> web.Response:
    body = await read_object(request)
    return json_response(
        {
            "software_config": _config(
                await configs.create_config(request.app[RUNTIME], body, scope(request).project)
            )
        }
    )


@routes.get(CONFIGS + "/{config_id}")
@auth("project")
async def show_config(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        found = await configs.show_config(session, request.match_info["config_id"])
    return json_response({"software_config": _config(found)})


@routes.delete(CONFIGS + "/{config_id}")
@auth("project")
async def delete_config(request: web.Request) -> web.Response:
    await configs.delete_config(request.app[RUNTIME], request.match_info["config_id"])
    return web.Response(status=204)


@routes.get(DEPLOYMENTS)
@auth("project")
async def list_deployments(request: web.Request) -> web.Response:
    """Every deployment (a stack's too); ``server_id`` (an id or a name) keeps one server's."""
    ref = request.query.get("server_id")
    async with request.app[RUNTIME].sessions() as session:
        server_id = None
        if ref:
            try:
                server_id = (await get_server(session, ref, within=within(request))).id
            except NotFoundError:
                return json_response({"software_deployments": []})  # Heat: no deployments there
        found = await deployments.list_deployments(session, server_id, seen(request))
    return json_response({"software_deployments": [_deployment(d) for d in found]})


@routes.get(DEPLOYMENTS + "/metadata/{server_id}")
@auth("project")
async def deployment_metadata(request: web.Request) -> web.Response:
    """The derived configs on a server, sorted by name as in its document (secret inputs masked)."""
    async with request.app[RUNTIME].sessions() as session:
        try:
            server = await get_server(session, request.match_info["server_id"], within=within(request))
        except NotFoundError:
            return json_response({"metadata": []})
        return json_response({"metadata": await server_items(session, server.id)})


@routes.post(DEPLOYMENTS)
@auth("project")
async def create_deployment(request: web.Request) -> web.Response:
    body = await read_object(request)
    rt, project = request.app[RUNTIME], scope(request).project
    found = await deployments.create_deployment(rt, body, project, seen(request))
    return json_response({"software_deployment": _deployment(found)})


@routes.get(DEPLOYMENTS + "/{deployment_id}")
@auth("project")
async def show_deployment(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        found = await deployments.show_deployment(session, request.match_info["deployment_id"])
    return json_response({"software_deployment": _deployment(found)})


@routes.put(DEPLOYMENTS + "/{deployment_id}")
@auth("project")
async def update_deployment(request: web.Request) -> web.Response:
    body = await read_object(request)
    found = await deployments.update_deployment(
        request.app[RUNTIME], request.match_info["deployment_id"], body, seen(request)
    )
    return json_response({"software_deployment": _deployment(found)})


@routes.delete(DEPLOYMENTS + "/{deployment_id}")
@auth("project")
async def delete_deployment(request: web.Request) -> web.Response:
    await deployments.delete_deployment(request.app[RUNTIME], request.match_info["deployment_id"])
    return web.Response(status=204)
