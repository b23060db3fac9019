"""The OpenAPI 3.1 description of the REST API, served at /openapi.json."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from control.api.openapi_heat import heat_paths
from control.api.openapi_parts import ADMIN, OBJ, STRING
from control.api.openapi_parts import CODES as _CODES
from control.api.openapi_parts import body as _body
from control.api.openapi_parts import errors as _errors
from control.api.openapi_parts import json_of as _json
from control.api.openapi_parts import obj as _object
from control.api.openapi_parts import op as _op
from control.api.openapi_parts import path_param as _path_param
from control.api.openapi_parts import query as _query
from control.api.openapi_parts import ref as _ref
from control.api.openapi_parts import strings as _strings

STACK = _path_param("name", "stack name or id")
SERVER = _path_param("name", "server name or id")


def _on_stack(method: str, summary: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A path under /v1/stacks/{name} with one admin operation."""
    return {"parameters": [STACK], method: _op(summary, ADMIN, responses, **extra)}


def _stack_paths() -> dict[str, Any]:
    stack, listing = _json(_ref("Stack")), {"type": "array", "items": _ref("Stack")}
    rows = _json({"type": "array", "items": OBJ})
    return {
        "/v1/stacks": {
            "post": _op(
                "Create a stack",
                ADMIN,
                {"201": stack, **_errors(400, 401, 409, 413, template=True)},
                requestBody=_body(_ref("StackRequest")),
            ),
            "get": _op("List stacks", ADMIN, {"200": _json(listing), **_errors(401)}),
        },
        "/v1/stacks/{name}": {
            "parameters": [STACK],
            "get": _op(
                "Show a stack with its resources and outputs",
                ADMIN,
                {"200": stack, **_errors(400, 401, 404)},
                parameters=[
                    _query("summary", "true: the stack's state alone, no resources or outputs", "boolean")
                ],
            ),
            "put": _op(
                "Update a stack (If-Match: version gives 409 when it changed)",
                ADMIN,
                {"202": stack, **_errors(400, 401, 404, 409, 413, template=True)},
                requestBody=_body(_ref("StackRequest")),
            ),
            "delete": _op("Delete a stack", ADMIN, {"202": stack, **_errors(401, 404)}),
        },
        "/v1/stacks/{name}/suspend": _on_stack(
            "post",
            "Suspend a stack: deployments that list SUSPEND run it, dependents first",
            {"202": stack, **_errors(401, 404, 409)},
        ),
        "/v1/stacks/{name}/resume": _on_stack(
            "post",
            "Resume a suspended stack: deployments that list RESUME run it, dependencies first",
            {"202": stack, **_errors(401, 404, 409)},
        ),
        "/v1/stacks/{name}/outputs": _on_stack(
            "get",
            "Stack outputs",
            {"200": _json({"type": "array", "items": _ref("Output")}), **_errors(401, 404)},
        ),
        "/v1/stacks/{name}/events": _on_stack(
            "get",
            "Stack events in order",
            {"200": _json({"type": "array", "items": _ref("Event")}), **_errors(400, 401, 404)},
            parameters=[
                _query("after", "only events with a greater id", "integer"),
                _query("wait", "seconds to wait for a newer event (long-poll, at most 30)", "number"),
                _query("traversal", "only events of this traversal (the stack's `traversal`)", "integer"),
                _query("limit", "at most this many events (1 or more), oldest first", "integer"),
            ],
        ),
        "/v1/stacks/{name}/resources": _on_stack(
            "get", "Stack resources", {"200": rows, **_errors(401, 404)}
        ),
        "/v1/stacks/{name}/cancel": _on_stack(
            "post",
            "Cancel the stack's action: deployments in progress fail as cancelled, agents stop their hooks",
            {"200": stack, **_errors(401, 404, 409)},
        ),
        "/v1/stacks/{name}/check": _on_stack(
            "get",
            "Compare the agents' ledger reports with the database: missing, failed, silent",
            {"200": _json(OBJ), **_errors(401, 404)},
        ),
        "/v1/stacks/{name}/converge": _on_stack(
            "post",
            "Re-apply every missing or failed deployment as a new generation",
            {"202": stack, **_errors(401, 404, 409)},
        ),
        "/v1/stacks/{name}/failures": _on_stack(
            "get",
            "Failed resources with the tail of their deployments' output",
            {"200": rows, **_errors(401, 404)},
        ),
    }


def _operator_paths() -> dict[str, Any]:
    return {
        "/v1/health": {"get": _op("Liveness", "public", {"200": _json(OBJ)})},
        "/openapi.json": {"get": _op("This document", "public", {"200": _json(OBJ)})},
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
                {"201": _json(OBJ), **_errors(400, 401, 409)},
                requestBody=_body(_object("name", name=STRING, transport=STRING)),
            ),
            "get": _op(
                "List servers", ADMIN, {"200": _json({"type": "array", "items": OBJ}), **_errors(401)}
            ),
        },
        "/v1/servers/{name}/token": {
            "parameters": [SERVER],
            "post": _op(
                "A new one-time enrolment token (a stack-made server, or a rebuilt one)",
                ADMIN,
                {"201": _json(OBJ), **_errors(401, 404)},
            ),
        },
        "/v1/servers/{name}/media": {
            "parameters": [SERVER],
            "post": _op(
                "An offline enrolment bundle for a LOCAL server's media: server id, control-plane key, one-time token",
                ADMIN,
                {"201": _json(OBJ), **_errors(400, 401, 404, 409)},
            ),
        },
        "/v1/servers/{name}": {
            "parameters": [SERVER],
            "get": _op("Show a server and its deployments", ADMIN, {"200": _json(OBJ), **_errors(401, 404)}),
            "patch": _op(
                "Move a server to another transport (HTTP, SWIFT, S3, LOCAL, RELAY, Heat's POLL_*)",
                ADMIN,
                {"200": _json(OBJ), **_errors(400, 401, 404)},
                requestBody=_body(_object("transport", transport=STRING)),
            ),
        },
        "/v1/keys": {
            "get": _op(
                "The document-signing key: id, public key, rotation chain, document lifetime",
                ADMIN,
                {"200": _json(OBJ), **_errors(401, busy=False)},
            )
        },
        "/v1/keys/rotate": {
            "post": _op(
                "A new signing key chained from the current one; every document is re-signed",
                ADMIN,
                {"201": _json(OBJ), **_errors(401)},
            )
        },
    }


def _media_paths() -> dict[str, Any]:
    required = ("format", "server_id", "enrol_token", "public_keys", "signature")
    enrolment = _object(*required, **_strings(*required, "hostname") | {"public_keys": OBJ})
    return {
        "/v1/enrolments/import": {
            "post": _op(
                "Import an agent's enrolment request carried back on media (enrol.<server id>.json)",
                ADMIN,
                {"200": _json(OBJ), **_errors(400, 401, 403, 404)},
                requestBody=_body(enrolment),
            ),
        },
        "/v1/signals/import": {
            "post": _op(
                "Import a signal carried back on media (<deployment id>/<generation> and the file's text)",
                ADMIN,
                {"200": _json(OBJ), **_errors(400, 401, 403, 404, 409, 413)},
                requestBody=_body(_object("name", "signal", name=STRING, signal=STRING)),
            ),
        },
    }


def _agent_paths() -> dict[str, Any]:
    unchanged = {"description": "Unchanged"}
    return {
        "/v1/agent/enrol": {
            "post": _op(
                "Enrol an agent with its one-time token and public keys",
                "public",
                {"201": _json(OBJ), **_errors(400, 401, 413)},
                requestBody=_body(_object("token", "public_keys", token=STRING, public_keys=OBJ)),
            )
        },
        "/v1/agent/document": {
            "get": _op(
                "The agent's document; 304 while If-None-Match matches; wait=S long-polls",
                "agent",
                {"200": _json(OBJ, "The per-server document"), "304": unchanged, **_errors(400, 401)},
                parameters=[_query("wait", "seconds to wait for a change", "number")],
            )
        },
        "/v1/agent/heartbeat": {
            "post": _op(
                "Agent heartbeat; 401 once the credential is revoked (the agent enrolled again)",
                "agent",
                {"200": _json(OBJ), **_errors(400, 401)},
                requestBody=_body(OBJ),
            )
        },
        "/v1/signal/{deployment_id}/{generation}": {
            "parameters": [
                _path_param("deployment_id", "deployment id"),
                _path_param("generation", "the generation the signal answers"),
            ],
            "post": _signal_op("Signal a deployment's result (Heat's flat form)"),
            "put": {
                **_signal_op("Signal a deployment's result, as TEMP_URL_SIGNAL PUTs it (its own sig)"),
                "security": [],
            },
        },
    }


def _signal_op(summary: str) -> dict[str, Any]:
    return _op(
        summary,
        "signal",
        {"200": _json(OBJ), **_errors(400, 401, 403, 404, 409, 410, 413)},
        parameters=[_query("sig", "the URL's capability (CFN_SIGNAL; for PUT, TEMP_URL_SIGNAL's)")],
        requestBody=_body(_ref("Signal")),
    )


def _schemas() -> dict[str, Any]:
    integer, nullable = {"type": "integer"}, {"type": ["string", "null"]}
    code = {"type": "string", "description": _CODES}
    return {
        "Error": _object("error", error=_object(code=code, message=STRING, where=nullable)),
        "StackRequest": _object(
            name=STRING,
            template={"oneOf": [STRING, OBJ]},
            files={"type": "object", "additionalProperties": STRING},
            environments={"type": "array", "items": STRING},
            parameters=OBJ,
            existing={"type": "boolean"},
            if_match={"type": ["string", "integer"]},
            rollback={"type": "boolean"},
            disable_rollback={"type": "boolean"},
        ),
        "Stack": _object(
            **_strings("id", "name", "status", "status_reason"),
            version=integer,
            traversal=integer,
            rollback={"type": "boolean"},
            parameters=OBJ,
        ),
        "Output": _object(output_key=STRING, output_value={}, description=STRING),
        "Event": _object(
            id=integer,
            timestamp={"type": "number"},
            **_strings("resource_name", "action", "status", "reason"),
            deployment_id=nullable,
            generation={"type": ["integer", "null"]},
            traversal=integer,
        ),
        "Deployment": _object(
            **_strings("id", "name", "server_id", "action", "status", "status_reason"),
            generation=integer,
            progress={
                "type": ["object", "null"],
                "description": "the last progress signal: seq, output_tail, output_bytes, elapsed, at",
            },
        ),
        "Signal": {
            **_object(
                **_strings("deploy_stdout", "deploy_stderr"),
                deploy_status_code={"type": ["integer", "string"]},
            ),
            "additionalProperties": True,
        },
    }


def spec() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "Anneal control plane", "version": version("anneal")},
        "paths": {
            **_stack_paths(),
            **_operator_paths(),
            **_media_paths(),
            **_agent_paths(),
            **heat_paths(),
        },
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
