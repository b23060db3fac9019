"""Heat's template routes: validate, resource types (list, schema, template), template versions and functions."""

from __future__ import annotations

from aiohttp import web

from control.api.app_keys import RUNTIME
from control.api.body import read_object
from control.api.heat_v1 import translate
from control.api.heat_v1.middleware import bool_param, json_response
from control.api.middleware import auth, changes_nothing
from control.services import catalogue

P = "/v1/{project_id}"

routes = web.RouteTableDef()


@routes.post(P + "/validate")
@changes_nothing
@auth("project")
async def validate(request: web.Request) -> web.Response:
    """``{template, files, environment[_files], parameters}`` → Description, Parameters, Environment; or 400."""
    bool_param(request, "show_nested")
    body = translate.anneal_body(await read_object(request, shared=True))
    return json_response(catalogue.validate(body, request.app[RUNTIME].settings.max_template_bytes))


@routes.get(P + "/resource_types")
@auth("project")
async def resource_types(request: web.Request) -> web.Response:
    found = catalogue.resource_types(request.query.get("name"), bool_param(request, "with_description"))
    return json_response({"resource_types": found})


@routes.get(P + "/resource_types/{type_name}")
@auth("project")
async def resource_schema(request: web.Request) -> web.Response:
    return json_response(catalogue.resource_schema(request.match_info["type_name"]))


@routes.get(P + "/resource_types/{type_name}/template")
@auth("project")
async def resource_template(request: web.Request) -> web.Response:
    kind = request.query.get("template_type", "cfn").lower()
    return json_response(catalogue.type_template(request.match_info["type_name"], kind))


@routes.get(P + "/template_versions")
@auth("project")
async def template_versions(request: web.Request) -> web.Response:
    return json_response({"template_versions": catalogue.template_versions()})


@routes.get(P + "/template_versions/{template_version}/functions")
@auth("project")
async def template_functions(request: web.Request) -> web.Response:
    with_condition = bool_param(request, "with_condition_func")
    found = catalogue.template_functions(request.match_info["template_version"], with_condition)
    return json_response({"template_functions": found})
