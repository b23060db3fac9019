"""The OpenAPI 3.1 description of the REST API, served at /openapi.json."""

from __future__ import annotations

from typing import Any

VERSION = "0.1.0"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "Invalid input",
        401: "No or wrong credential",
        403: "Credential out of scope",
        404: "Not found",
        409: "Conflict with the current state",
        410: "What the credential was for no longer exists",
        413: "Over a size cap",
    }
    return {str(c): _json(_ref("Error"), text[c]) for c in codes}


def _op(summary: str, security: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    op["security"] = [] if security == "public" else [{security: []}]
    op.update(extra)
    return op


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def _query(name: str, description: str, type_: str = "string") -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": type_},
    }


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


STACK = _path_param("name", "stack name or id")
ADMIN = "admin"


def _stack_paths() -> dict[str, Any]:
    listing = {"type": "array", "items": _ref("Stack")}
    return {
        "/v1/stacks": {
            "post": _op(
                "Create a stack",
                ADMIN,
                {"201": _json(_ref("Stack")), **_errors(400, 401, 409, 413)},
                requestBody=_body(_ref("StackRequest")),
            ),
            "get": _op("List stacks", ADMIN, {"200": _json(listing), **_errors(401)}),
        },
        "/v1/stacks/{name}": {
            "parameters": [STACK],
            "get": _op(
                "Show a stack with its resources and outputs",
                ADMIN,
                {"200": _json(_ref("Stack")), **_errors(400, 401, 404)},
                parameters=[
                    _query("summary", "true: the stack's state alone, no resources or outputs", "boolean")
                ],
            ),
            "put": _op(
                "Update a stack (If-Match: version gives 409 when it changed)",
                ADMIN,
                {"202": _json(_ref("Stack")), **_errors(400, 401, 404, 409, 413)},
                requestBody=_body(_ref("StackRequest")),
            ),
            "delete": _op("Delete a stack", ADMIN, {"202": _json(_ref("Stack")), **_errors(401, 404)}),
        },
        "/v1/stacks/{name}/suspend": {
            "parameters": [STACK],
            "post": _op(
                "Suspend a stack: deployments that list SUSPEND run it, dependents first",
                ADMIN,
                {"202": _json(_ref("Stack")), **_errors(401, 404, 409)},
            ),
        },
        "/v1/stacks/{name}/resume": {
            "parameters": [STACK],
            "post": _op(
                "Resume a suspended stack: deployments that list RESUME run it, dependencies first",
                ADMIN,
                {"202": _json(_ref("Stack")), **_errors(401, 404, 409)},
            ),
        },
        "/v1/stacks/{name}/outputs": {
            "parameters": [STACK],
            "get": _op(
                "Stack outputs",
                ADMIN,
                {"200": _json({"type": "array", "items": _ref("Output")}), **_errors(401, 404)},
            ),
        },
        "/v1/stacks/{name}/events": {
            "parameters": [STACK],
            "get": _op(
                "Stack events in order",
                ADMIN,
                {"200": _json({"type": "array", "items": _ref("Event")}), **_errors(400, 401, 404)},
                parameters=[
                    _query("after", "only events with a greater id", "integer"),
                    _query("wait", "seconds to wait for a newer event (long-poll, at most 30)", "number"),
                    _query("traversal", "only events of this traversal (the stack's `traversal`)", "integer"),
                    _query("limit", "at most this many events (1 or more), oldest first", "integer"),
                ],
            ),
        },
        "/v1/stacks/{name}/resources": {
            "parameters": [STACK],
            "get": _op(
                "Stack resources",
                ADMIN,
                {"200": _json({"type": "array", "items": {"type": "object"}}), **_errors(401, 404)},
            ),
        },
        "/v1/stacks/{name}/cancel": {
            "parameters": [STACK],
            "post": _op(
                "Cancel the stack's action: deployments in progress fail as cancelled, agents stop their hooks",
                ADMIN,
                {"200": _json(_ref("Stack")), **_errors(401, 404, 409)},
            ),
        },
        "/v1/stacks/{name}/check": {
            "parameters": [STACK],
            "get": _op(
                "Compare the agents' ledger reports with the database: missing, failed, silent",
                ADMIN,
                {"200": _json({"type": "object"}), **_errors(401, 404)},
            ),
        },
        "/v1/stacks/{name}/converge": {
            "parameters": [STACK],
            "post": _op(
                "Re-apply every missing or failed deployment as a new generation",
                ADMIN,
                {"202": _json(_ref("Stack")), **_errors(401, 404, 409)},
            ),
        },
        "/v1/stacks/{name}/failures": {
            "parameters": [STACK],
            "get": _op(
                "Failed resources with the tail of their deployments' output",
                ADMIN,
                {"200": _json({"type": "array", "items": {"type": "object"}}), **_errors(401, 404)},
            ),
        },
    }


def _other_paths() -> dict[str, Any]:
    obj = {"type": "object"}
    return {
        "/v1/deployments": {
            "get": _op(
                "List deployments",
                ADMIN,
                {"200": _json({"type": "array", "items": _ref("Deployment")}), **_errors(400, 401, 404)},
                parameters=[
                    _query("stack", "stack name or id"),
                    _query("server", "server name or id"),
                    _query("status", "IN_PROGRESS, COMPLETE or FAILED"),
                ],
            )
        },
        "/v1/deployments/{id}": {
            "parameters": [_path_param("id", "deployment id")],
            "get": _op(
                "Show a deployment: inputs, outputs, stdout, stderr",
                ADMIN,
                {"200": _json(_ref("Deployment")), **_errors(401, 404)},
            ),
        },
        "/v1/servers": {
            "post": _op(
                "Create a server awaiting enrolment; returns its one-time token",
                ADMIN,
                {"201": _json(obj), **_errors(400, 401, 409)},
                requestBody=_body(
                    {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}, "transport": {"type": "string"}},
                    }
                ),
            ),
            "get": _op(
                "List servers", ADMIN, {"200": _json({"type": "array", "items": obj}), **_errors(401)}
            ),
        },
        "/v1/servers/{name}/token": {
            "parameters": [_path_param("name", "server name or id")],
            "post": _op(
                "A new one-time enrolment token (a stack-made server, or a rebuilt one)",
                ADMIN,
                {"201": _json(obj), **_errors(401, 404)},
            ),
        },
        "/v1/servers/{name}/media": {
            "parameters": [_path_param("name", "server name or id")],
            "post": _op(
                "An offline enrolment bundle for a LOCAL server's media: server id, control-plane key, one-time token",
                ADMIN,
                {"201": _json(obj), **_errors(400, 401, 404, 409)},
            ),
        },
        "/v1/enrolments/import": {
            "post": _op(
                "Import an agent's enrolment request carried back on media (enrol.<server id>.json)",
                ADMIN,
                {"200": _json(obj), **_errors(400, 401, 403, 404)},
                requestBody=_body(
                    {
                        "type": "object",
                        "required": ["format", "server_id", "enrol_token", "public_keys", "signature"],
                        "properties": {
                            "format": {"type": "string"},
                            "server_id": {"type": "string"},
                            "enrol_token": {"type": "string"},
                            "public_keys": obj,
                            "hostname": {"type": "string"},
                            "signature": {"type": "string"},
                        },
                    }
                ),
            ),
        },
        "/v1/servers/{name}": {
            "parameters": [_path_param("name", "server name or id")],
            "get": _op("Show a server and its deployments", ADMIN, {"200": _json(obj), **_errors(401, 404)}),
            "patch": _op(
                "Move a server to another transport (HTTP, SWIFT, S3, LOCAL, RELAY, Heat's POLL_*)",
                ADMIN,
                {"200": _json(obj), **_errors(400, 401, 404)},
                requestBody=_body(
                    {
                        "type": "object",
                        "required": ["transport"],
                        "properties": {"transport": {"type": "string"}},
                    }
                ),
            ),
        },
        "/v1/signals/import": {
            "post": _op(
                "Import a signal carried back on media (<deployment id>/<generation> and the file's text)",
                ADMIN,
                {"200": _json(obj), **_errors(400, 401, 403, 404, 409, 413)},
                requestBody=_body(
                    {
                        "type": "object",
                        "required": ["name", "signal"],
                        "properties": {"name": {"type": "string"}, "signal": {"type": "string"}},
                    }
                ),
            ),
        },
        "/v1/keys": {
            "get": _op(
                "The document-signing key: id, public key, rotation chain, document lifetime",
                ADMIN,
                {"200": _json(obj), **_errors(401)},
            )
        },
        "/v1/keys/rotate": {
            "post": _op(
                "A new signing key chained from the current one; every document is re-signed",
                ADMIN,
                {"201": _json(obj), **_errors(401)},
            )
        },
        "/v1/agent/enrol": {
            "post": _op(
                "Enrol an agent with its one-time token and public keys",
                "public",
                {"201": _json(obj), **_errors(400, 401, 413)},
                requestBody=_body(
                    {
                        "type": "object",
                        "required": ["token", "public_keys"],
                        "properties": {"token": {"type": "string"}, "public_keys": {"type": "object"}},
                    }
                ),
            )
        },
        "/v1/agent/document": {
            "get": _op(
                "The agent's document; 304 while If-None-Match matches; wait=S long-polls",
                "agent",
                {
                    "200": _json(obj, "The per-server document"),
                    "304": {"description": "Unchanged"},
                    **_errors(400, 401),
                },
                parameters=[_query("wait", "seconds to wait for a change", "number")],
            )
        },
        "/v1/agent/heartbeat": {
            "post": _op(
                "Agent heartbeat",
                "agent",
                {"200": _json(obj), **_errors(400, 401, 404)},
                requestBody=_body(obj),
            )
        },
        "/v1/heat/metadata/{server_id}": {
            "parameters": [_path_param("server_id", "a Heat-compatible server's id")],
            "get": _op(
                "A Heat-compatible server's document, for os-collect-config's request collector",
                "signal",
                {
                    "200": _json(obj, "The per-server document with its os-collect-config section"),
                    "304": {"description": "Unchanged"},
                    **_errors(401, 403, 404),
                },
                parameters=[_query("sig", "the URL's capability for this server")],
            ),
        },
        "/v1/signal/{deployment_id}/{generation}": {
            "parameters": [
                _path_param("deployment_id", "deployment id"),
                _path_param("generation", "the generation the signal answers"),
            ],
            "post": _op(
                "Signal a deployment's result (Heat's flat form)",
                "signal",
                {"200": _json(obj), **_errors(400, 401, 403, 404, 409, 410, 413)},
                parameters=[_query("sig", "the URL's capability (CFN_SIGNAL)")],
                requestBody=_body(_ref("Signal")),
            ),
        },
        "/v1/health": {"get": _op("Liveness", "public", {"200": _json(obj)})},
        "/openapi.json": {"get": _op("This document", "public", {"200": _json(obj)})},
    }


def _schemas() -> dict[str, Any]:
    string, obj = {"type": "string"}, {"type": "object"}
    return {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {"code": string, "message": string, "where": {"type": ["string", "null"]}},
                }
            },
        },
        "StackRequest": {
            "type": "object",
            "properties": {
                "name": string,
                "template": {"oneOf": [string, obj]},
                "files": {"type": "object", "additionalProperties": string},
                "environments": {"type": "array", "items": string},
                "parameters": obj,
                "existing": {"type": "boolean"},
                "if_match": {"type": ["string", "integer"]},
                "rollback": {"type": "boolean"},
                "disable_rollback": {"type": "boolean"},
            },
        },
        "Stack": {
            "type": "object",
            "properties": {
                "id": string,
                "name": string,
                "status": string,
                "status_reason": string,
                "version": {"type": "integer"},
                "traversal": {"type": "integer"},
                "rollback": {"type": "boolean"},
                "parameters": obj,
            },
        },
        "Output": {
            "type": "object",
            "properties": {"output_key": string, "output_value": {}, "description": string},
        },
        "Event": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "timestamp": {"type": "number"},
                "resource_name": string,
                "action": string,
                "status": string,
                "reason": string,
                "deployment_id": {"type": ["string", "null"]},
                "generation": {"type": ["integer", "null"]},
                "traversal": {"type": "integer"},
            },
        },
        "Deployment": {
            "type": "object",
            "properties": {
                "id": string,
                "name": string,
                "server_id": string,
                "action": string,
                "status": string,
                "status_reason": string,
                "generation": {"type": "integer"},
                "progress": {
                    "type": ["object", "null"],
                    "description": "the last progress signal: seq, output_tail, output_bytes, elapsed, at",
                },
            },
        },
        "Signal": {
            "type": "object",
            "properties": {
                "deploy_stdout": string,
                "deploy_stderr": string,
                "deploy_status_code": {"type": ["integer", "string"]},
            },
            "additionalProperties": True,
        },
    }


def spec() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "Anneal control plane", "version": VERSION},
        "paths": {**_stack_paths(), **_other_paths()},
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "admin": {"type": "http", "scheme": "bearer", "description": "the admin token"},
                "agent": {"type": "http", "scheme": "bearer", "description": "an agent's credential"},
                "signal": {
                    "type": "apiKey",
                    "in": "query",
                    "name": "sig",
                    "description": "a signal URL's signature, or the agent's bearer credential",
                },
            },
        },
    }
