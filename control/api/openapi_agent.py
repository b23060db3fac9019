"""The OpenAPI description of what agents call and what media carries back (part of /openapi.json)."""

from __future__ import annotations

from typing import Any

from agent.transports.offline import REQUEST_FORMAT
from control.api.openapi_schemas import (
    ADMIN,
    NON_EMPTY,
    OBJ,
    PUBLIC_KEYS,
    STRING,
    errors,
    integer,
    json_body,
    obj,
    op,
    path_param,
    query,
    ref,
    request_body,
    seconds,
)


def media_paths() -> dict[str, Any]:
    required = ("format", "server_id", "enrol_token", "public_keys", "signature")
    enrolment = obj(
        *required,
        **dict.fromkeys(("server_id", "enrol_token", "signature"), NON_EMPTY),
        format={"const": REQUEST_FORMAT},
        hostname=STRING,
        public_keys=PUBLIC_KEYS,
    )
    signal_file = obj(
        "name",
        "signal",
        name={
            "type": "string",
            "pattern": "^[^/]+/[0-9]{1,9}$",
            "description": "<deployment id>/<generation>",
        },
        signal=STRING,
    )
    return {
        "/v1/enrolments/import": {
            "post": op(
                "Import an agent's enrolment request carried back on media (enrol.<server id>.json)",
                ADMIN,
                {"200": json_body(OBJ), **errors(401, 403, 404, body=True)},
                requestBody=request_body(enrolment),
            ),
        },
        "/v1/signals/import": {
            "post": op(
                "Import a signal carried back on media (<deployment id>/<generation> and the file's text)",
                ADMIN,
                {"200": json_body(OBJ), **errors(401, 403, 404, 409, body=True)},
                requestBody=request_body(signal_file),
            ),
        },
    }


def agent_paths() -> dict[str, Any]:
    unchanged = {"description": "Unchanged"}
    return {
        "/v1/agent/enrol": {
            "post": op(
                "Enrol an agent with its one-time token and public keys",
                "public",
                {"201": json_body(OBJ), **errors(401, 411, 503, body=True)},
                requestBody=request_body(
                    obj("token", "public_keys", token=NON_EMPTY, public_keys=PUBLIC_KEYS)
                ),
            )
        },
        "/v1/agent/document": {
            "get": op(
                "The agent's document; 304 while If-None-Match matches; wait=S long-polls",
                "agent",
                {"200": json_body(OBJ, "The per-server document"), "304": unchanged, **errors(401)},
                parameters=[query("wait", "seconds to wait for a change (long-poll)", seconds(60))],
            )
        },
        "/v1/agent/heartbeat": {
            "post": op(
                "Agent heartbeat (with checks on the host: `checks`, acknowledged in the answer); "
                "401 once the credential is revoked (the agent enrolled again, its server removed)",
                "agent",
                {"200": json_body(OBJ), **errors(401, body=True)},
                requestBody=request_body(OBJ),
            )
        },
        "/v1/signal/{deployment_id}/{generation}": {
            "parameters": [
                path_param("deployment_id", "deployment id"),
                path_param("generation", "the generation the signal answers", integer()),
            ],
            "post": _signal_op("Signal a deployment's result (Heat's flat form)"),
            "put": {
                **_signal_op("Signal a deployment's result, as TEMP_URL_SIGNAL PUTs it (its own sig)"),
                "security": [],
            },
        },
        "/v1/resource-signal/{stack_id}/{resource}": {
            "parameters": [
                path_param("stack_id", "the stack's id"),
                path_param("resource", "the resource's name"),
            ],
            "post": op(
                "Signal a resource by its URL (a scaling policy's signal_url or alarm_url); an optional JSON body",
                "signal",
                {"200": json_body(OBJ), **errors(401, 403, 404, 409, body=True)},
                parameters=[query("sig", "the URL's capability for that resource")],
                requestBody={"required": False, "content": {"application/json": {"schema": OBJ}}},
            ),
        },
    }


def _signal_op(summary: str) -> dict[str, Any]:
    return op(
        summary,
        "signal",
        {"200": json_body(OBJ), **errors(401, 403, 404, 409, 410, body=True)},
        parameters=[query("sig", "the URL's capability (CFN_SIGNAL; for PUT, TEMP_URL_SIGNAL's)")],
        requestBody=request_body(ref("Signal")),
    )
