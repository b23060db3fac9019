"""The routes Heat's own agents and templates call, as /openapi.json describes them (control/api/heat.py)."""

from __future__ import annotations

from typing import Any

from control.api.openapi_schemas import (
    NON_EMPTY,
    OBJ,
    STRING,
    errors,
    json_body,
    obj,
    op,
    path_param,
    query,
    request_body,
)

PUBLIC = "public"  # each route checks its own credential (control/documents/heatauth.py)
_STACK = "/v1/heat/orchestration/v1/{project}/stacks/{stack_name}/{stack_id}/resources/{resource}"
_TOKEN = {
    "name": "X-Auth-Token",
    "in": "header",
    "required": True,
    "description": "a token from /v1/heat/keystone/v3/auth/tokens",
    "schema": STRING,
}

_ACTION = {"type": "string", "enum": ["DescribeStackResource"]}
#: Keystone's password login body, as far as the handler reads it (services/heatapi.py, login).
_USER = {
    **obj(id=NON_EMPTY, name=NON_EMPTY, password=STRING),
    "anyOf": [{"required": ["id"]}, {"required": ["name"]}],
}
_AUTH = obj(
    "identity",
    identity=obj(
        "methods",
        "password",
        methods={"type": "array", "items": STRING, "contains": {"const": "password"}},
        password=obj("user", user=_USER),
    ),
    scope=obj(project=OBJ),
)


def heat_paths() -> dict[str, Any]:
    stack_params = [
        path_param("project", "the project the token was scoped to (not checked)"),
        path_param("stack_name", "the stack's name"),
        path_param("stack_id", "the stack's id"),
        path_param("resource", "the resource's name"),
    ]
    handle = [path_param("handle_id", "the handle's id")]
    wait = op(
        "Signal a wait condition handle ({status, reason, data, id}; AWS: {Status, Reason, UniqueId, Data})",
        PUBLIC,
        {"200": json_body(OBJ), **errors(400, 401, 403, 409, 410, 413)},
        parameters=[query("sig", "the handle's pre-signed capability (or X-Auth-Token: its token)")],
        requestBody=request_body(OBJ),
    )
    return {
        "/v1/heat/metadata/{server_id}": {
            "parameters": [path_param("server_id", "a Heat-compatible server's id")],
            "get": op(
                "A server's document for os-collect-config's request collector (its capability in sig)",
                PUBLIC,
                {
                    "200": json_body(OBJ, "The per-server document with its os-collect-config section"),
                    "304": {"description": "Unchanged since If-None-Match"},
                    **errors(401, 403, 404),
                },
                parameters=[query("sig", "the URL's capability for this server")],
            ),
        },
        "/v1/heat/cfn/v1/": {
            "get": op(
                "heat-api-cfn's DescribeStackResource, EC2 signature v2 by the server's key (cfn collector)",
                PUBLIC,
                {
                    "200": {"description": "XML; the document is StackResourceDetail/Metadata"},
                    **errors(400, 401, 403, 404),
                },
                parameters=[
                    {**query("Action", "the one action served"), "required": True, "schema": _ACTION},
                    *(
                        query(name, "as the cfn collector sends it")
                        for name in ("StackName", "LogicalResourceId", "AWSAccessKeyId", "Signature")
                    ),
                ],
            )
        },
        "/v1/heat/keystone": {
            "get": op("Keystone's version list", PUBLIC, {"300": json_body(OBJ), "200": json_body(OBJ)})
        },
        "/v1/heat/keystone/v3": {
            "get": op("Keystone v3's version document", PUBLIC, {"200": json_body(OBJ)})
        },
        "/v1/heat/keystone/v3/": {
            "get": op("Keystone v3's version document", PUBLIC, {"200": json_body(OBJ)})
        },
        "/v1/heat/keystone/v3/auth/tokens": {
            "post": op(
                "Keystone password login of a server's, deployment's or handle's user; X-Subject-Token",
                PUBLIC,
                {"201": json_body(obj(token=OBJ)), **errors(400, 401, 404)},
                requestBody=request_body(obj("auth", auth=_AUTH)),
            )
        },
        _STACK + "/metadata": {
            "parameters": stack_params,
            "get": op(
                "A resource's metadata: the server's document (the heat collector)",
                PUBLIC,
                {"200": json_body(obj(metadata=OBJ)), **errors(401, 403, 404)},
                parameters=[_TOKEN],
            ),
        },
        _STACK + "/signal": {
            "parameters": stack_params,
            "post": op(
                "Signal a resource: a HEAT_SIGNAL deployment's result, or a wait condition handle",
                PUBLIC,
                {"200": json_body(OBJ), **errors(400, 401, 403, 404, 409, 410, 413)},
                parameters=[_TOKEN],
                requestBody=request_body(OBJ),
            ),
        },
        "/v1/heat/waitcondition/{handle_id}": {"parameters": handle, "post": wait, "put": wait},
    }
