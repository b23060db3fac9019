"""The OpenAPI 3.1 description of the REST API, served at /openapi.json."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from control.api.openapi_access import access_paths
from control.api.openapi_agent import agent_paths, media_paths
from control.api.openapi_heat import heat_paths
from control.api.openapi_schemas import (
    ADMIN,
    MOMENT,
    OBJ,
    SERVER_NAME,
    STRING,
    TRANSPORT,
    adopt_request,
    errors,
    handover_request,
    integer,
    json_body,
    obj,
    op,
    path_param,
    query,
    ref,
    request_body,
    schemas,
    seconds,
)

#: Names are unique per project: a member's or reader's are its project's; the admin token's
#: ``?project=P`` says whose (a name several projects have is a 409 naming them otherwise).
STACK = path_param("name", "stack name (in the caller's project; admin token: ?project=P) or id")
BOOLEAN = {"type": "boolean"}
STATUS = {"type": "string", "enum": ["IN_PROGRESS", "COMPLETE", "FAILED"]}
SERVER = path_param("name", "server name (in the caller's project; admin token: ?project=P) or id")
NESTED_DEPTH = query("nested_depth", "include nested stacks this many levels down (default 0)", integer())
#: A listing a page at a time, in id order (keyset: any page of a million rows costs one index range).
LIMIT = query("limit", "at most N rows, in id order", integer(1))


def _on_stack(method: str, summary: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A path under /v1/stacks/{name} with one admin operation."""
    return {"parameters": [STACK], method: op(summary, ADMIN, responses, **extra)}


def _stack_paths() -> dict[str, Any]:
    stack, listing = json_body(ref("Stack")), {"type": "array", "items": ref("Stack")}
    rows = json_body({"type": "array", "items": OBJ})
    return {
        "/v1/stacks": {
            "post": op(
                "Create a stack",
                ADMIN,
                {"201": stack, **errors(401, 409, template=True, body=True)},
                requestBody=request_body(ref("StackRequest")),
            ),
            "get": op(
                "List stacks",
                ADMIN,
                {"200": json_body(listing), **errors(401)},
                parameters=[query("nested", "true: nested stacks too (each names its parent)", BOOLEAN)],
            ),
        },
        "/v1/stacks/{name}": {
            "parameters": [STACK],
            "get": op(
                "Show a stack with its resources and outputs",
                ADMIN,
                {"200": stack, **errors(401, 404)},
                parameters=[
                    query("summary", "true: the stack's state alone, no resources or outputs", BOOLEAN),
                    query(
                        "resources_limit",
                        "only the first N resources; `resources_more` says if others exist",
                        integer(1),
                    ),
                    query(
                        "progress",
                        "with summary: `progress` counts the resources (total, current), those done and "
                        "failed in the running traversal, and those in progress",
                        BOOLEAN,
                    ),
                ],
            ),
            "put": op(
                "Update a stack (If-Match: version gives 409 when it changed)",
                ADMIN,
                {"202": stack, **errors(401, 404, 409, template=True, body=True)},
                requestBody=request_body(ref("StackUpdate")),
            ),
            "delete": op(
                "Delete a stack (409 for a nested stack: its parent deletes it)",
                ADMIN,
                {"202": stack, **errors(401, 404, 409)},
                parameters=[
                    query(
                        "force",
                        "true: skip the DELETE configs (a server that never comes back), "
                        "each with a WARNING event; those already waiting are skipped too",
                        BOOLEAN,
                    )
                ],
            ),
        },
        "/v1/stacks/{name}/preview": _on_stack(
            "put",
            "The plan of an update (PUT's body): each resource's change, reason, server, runs, inputs; writes nothing",
            {"200": json_body(OBJ), **errors(401, 404, template=True, body=True)},
            requestBody=request_body(ref("StackUpdate")),
        ),
        "/v1/stacks/{name}/abandon": _on_stack(
            "post",
            "Remove the stack running nothing (its servers and deployments stay, in no stack): "
            "Heat's abandon data, which `/v1/adopt` takes back; its secrets sealed with the data key. "
            "With a body `{to, to_key}` (or a hand-over set on the stack), its servers are handed to that "
            "control plane, everything sealed to its adopt key",
            {"200": json_body(OBJ), **errors(400, 401, 404, 409)},
            requestBody={**request_body(handover_request()), "required": False},
        ),
        "/v1/stacks/{name}/handover": _on_stack(
            "put",
            "Where the stack's next abandon (through either API) hands its servers; `{}` undoes it",
            {"200": json_body(OBJ), **errors(400, 401, 404)},
            requestBody=request_body({**handover_request(), "required": []}),
        ),
        "/v1/adopt": {
            "post": op(
                "A stack again from its abandon data: ADOPT_COMPLETE at once, its deployments re-attached, nothing run",
                ADMIN,
                {"201": stack, **errors(400, 401, 409)},
                requestBody=request_body(adopt_request()),
            )
        },
        "/v1/stacks/{name}/suspend": _on_stack(
            "post",
            "Suspend a stack: deployments that list SUSPEND run it, dependents first",
            {"202": stack, **errors(401, 404, 409)},
        ),
        "/v1/stacks/{name}/resume": _on_stack(
            "post",
            "Resume a suspended stack: deployments that list RESUME run it, dependencies first",
            {"202": stack, **errors(401, 404, 409)},
        ),
        "/v1/stacks/{name}/outputs": _on_stack(
            "get",
            "Stack outputs",
            {"200": json_body({"type": "array", "items": ref("Output")}), **errors(401, 404)},
        ),
        "/v1/stacks/{name}/events": _on_stack(
            "get",
            "Stack events in order",
            {"200": json_body({"type": "array", "items": ref("Event")}), **errors(401, 404)},
            parameters=[
                query("after", "only events with a greater id", integer()),
                query("wait", "seconds to wait for a newer event (long-poll)", seconds(30)),
                query("traversal", "only events of this traversal (the stack's `traversal`)", integer()),
                query("limit", "at most this many events, oldest first", integer(1)),
                query("newest", "true: newest first (the last `limit` events; not with `wait`)", BOOLEAN),
                query(
                    "before", "only events with a smaller id (the next page back, newest first)", integer(1)
                ),
                query("resource", "only the events of the resource of this name", STRING),
                query(
                    "since",
                    "only events at or after this time: ISO 8601 or epoch seconds (empty: no bound)",
                    MOMENT,
                ),
                NESTED_DEPTH,
            ],
        ),
        "/v1/stacks/{name}/resources": _on_stack(
            "get",
            "Stack resources",
            {"200": rows, **errors(400, 401, 404)},
            parameters=[NESTED_DEPTH, LIMIT, query("after", "only resources after this id", integer())],
        ),
        "/v1/stacks/{name}/graph": _on_stack(
            "get",
            "The dependency graph: nodes (resources and their state) and edges with their kinds "
            "(depends_on, get_attr, get_resource, server, reference)",
            {"200": json_body(OBJ), **errors(401, 404)},
        ),
        "/v1/stacks/{name}/resources/{resource}/signal": {
            "parameters": [STACK, path_param("resource", "the resource's name")],
            "post": op(
                "Signal a resource (Heat's resource signal): a scaling policy adjusts its group",
                ADMIN,
                {"200": json_body(OBJ), **errors(401, 404, 409, body=True)},
                requestBody={"required": False, "content": {"application/json": {"schema": OBJ}}},
            ),
        },
        "/v1/stacks/{name}/cancel": _on_stack(
            "post",
            "Cancel the stack's action: deployments in progress fail as cancelled, agents stop their hooks",
            {"200": stack, **errors(401, 404, 409)},
        ),
        "/v1/stacks/{name}/check": {
            "parameters": [STACK],
            "get": op(
                "Compare the agents' ledger reports with the database (missing, failed, silent) and "
                "report the answers of checks on the host (host: in_sync, drifted with the diff, unknown, pending)",
                ADMIN,
                {"200": json_body(OBJ), **errors(401, 404)},
            ),
            "post": op(
                "Ask the servers to check every COMPLETE deployment on the host, changing nothing; "
                "the answers show in GET as they arrive",
                ADMIN,
                {"202": json_body(OBJ), **errors(401, 404, 409)},
            ),
        },
        "/v1/stacks/{name}/converge": _on_stack(
            "post",
            "Re-apply every missing, failed or drifted deployment as a new generation",
            {"202": stack, **errors(401, 404, 409)},
        ),
        "/v1/stacks/{name}/failures": _on_stack(
            "get",
            "Failed resources with the tail of their deployments' output",
            {"200": rows, **errors(401, 404)},
        ),
    }


def _operator_paths() -> dict[str, Any]:
    return {
        "/v1/health": {"get": op("Liveness", "public", {"200": json_body(OBJ)})},
        "/openapi.json": {"get": op("This document", "public", {"200": json_body(OBJ)})},
        "/metrics": {
            "get": op(
                "Prometheus metrics of this process and the fleet (docs/operations.md, Metrics)",
                "metrics",
                {
                    "200": {
                        "description": "the Prometheus text format, version 0.0.4",
                        "content": {"text/plain": {"schema": STRING}},
                    },
                    **errors(401),
                },
            )
        },
        "/v1/deployments": {
            "get": op(
                "List deployments",
                ADMIN,
                {"200": json_body({"type": "array", "items": ref("Deployment")}), **errors(400, 401, 404)},
                parameters=[
                    query("stack", "stack name or id"),
                    query("server", "server name or id"),
                    query("status", "deployments in this state", STATUS),
                    LIMIT,
                    query("after", "only deployments after this id"),
                ],
            )
        },
        "/v1/deployments/{id}": {
            "parameters": [path_param("id", "deployment id, a unique prefix of it, or stack/resource")],
            "get": op(
                "Show a deployment: inputs, outputs, stdout, stderr",
                ADMIN,
                {"200": json_body(ref("Deployment")), **errors(401, 404)},
            ),
        },
        "/v1/servers": {
            "post": op(
                "Create a server awaiting enrolment; returns its one-time token",
                ADMIN,
                {"201": json_body(OBJ), **errors(401, 409, body=True)},
                requestBody=request_body(
                    obj(
                        "name",
                        name=SERVER_NAME,
                        transport={"oneOf": [TRANSPORT, {"type": "null"}]},
                        heat_compatible=BOOLEAN,
                    )
                ),
            ),
            "get": op(
                "List servers", ADMIN, {"200": json_body({"type": "array", "items": OBJ}), **errors(401)}
            ),
        },
        "/v1/servers/{name}/token": {
            "parameters": [SERVER],
            "post": op(
                "A new one-time enrolment token (a stack-made server, or a rebuilt one)",
                ADMIN,
                {"201": json_body(OBJ), **errors(401, 404)},
            ),
        },
        "/v1/servers/{name}/media": {
            "parameters": [SERVER],
            "post": op(
                "An offline enrolment bundle for a LOCAL server's media: server id, control-plane key, one-time token",
                ADMIN,
                {"201": json_body(OBJ), **errors(401, 404, 409)},
            ),
        },
        "/v1/servers/{name}": {
            "parameters": [SERVER],
            "get": op(
                "Show a server and its deployments", ADMIN, {"200": json_body(OBJ), **errors(401, 404)}
            ),
            "patch": op(
                "Move a server to another transport (HTTP, SWIFT, S3, LOCAL, RELAY, Heat's POLL_*)",
                ADMIN,
                {"200": json_body(OBJ), **errors(401, 404, body=True)},
                requestBody=request_body(obj("transport", transport=TRANSPORT)),
            ),
            "delete": op(
                "Delete a server; 409 naming the stacks that use it, unless force releases it "
                "(its deployments in progress fail)",
                ADMIN,
                {"200": json_body(OBJ), **errors(401, 404, 409)},
                parameters=[query("force", "true: delete it even while stacks use it", BOOLEAN)],
            ),
        },
        "/v1/keys": {
            "get": op(
                "The document-signing key: id, public key, rotation chain, document lifetime",
                ADMIN,
                {"200": json_body(OBJ), **errors(401, busy=False)},
            )
        },
        "/v1/keys/rotate": {
            "post": op(
                "A new signing key chained from the current one; every document is re-signed",
                ADMIN,
                {"201": json_body(OBJ), **errors(401)},
            )
        },
    }


#: Paths whose operations take a reader's token (reads) or a member's (changes) of the row's project.
PROJECT_PATHS = ("/v1/stacks", "/v1/deployments", "/v1/servers")


def _by_role(paths: dict[str, Any]) -> dict[str, Any]:
    """Stacks, deployments and servers: reads need the ``read`` policy, changes ``write`` (api/operator.py, api/fleet.py)."""
    for path, item in paths.items():
        if path.startswith(PROJECT_PATHS):
            for method, operation in item.items():
                if method != "parameters":
                    operation["security"] = [{"read" if method == "get" else "write": []}]
    return paths


def spec() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "Anneal control plane", "version": version("anneal")},
        "paths": {
            **_by_role(_stack_paths()),
            **_by_role(_operator_paths()),
            **access_paths(),
            **media_paths(),
            **agent_paths(),
            **heat_paths(),
        },
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "admin": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the admin token, or a token `anneal token create` made: a reader's reads its "
                    "project, a member's reads and changes it, an admin's any; with ?project=P an admin names the "
                    "project whose names it means and where it creates (docs/security.md, Names are per project)",
                },
                "read": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a token of any role (reader, member, admin): a row of another project is "
                    "answered 404",
                },
                "write": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a member's or an admin's token; a reader's gets 403",
                },
                "metrics": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the metrics token (<data dir>/metrics-token) or the admin token",
                },
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
