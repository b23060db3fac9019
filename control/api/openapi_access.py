"""The OpenAPI paths of API tokens and the audit log (control/api/access.py)."""

from __future__ import annotations

from typing import Any

from control.api.openapi_schemas import (
    ADMIN,
    MOMENT,
    OBJ,
    errors,
    integer,
    json_body,
    op,
    path_param,
    query,
    request_body,
)

PROJECT = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$"}
_COMMON = {
    "name": {"type": "string", "maxLength": 255, "description": "shown in `token list` and the audit log"},
    "expires": {"type": "number", "exclusiveMinimum": 0, "description": "seconds until it expires"},
}
TOKEN_REQUEST = {
    "oneOf": [
        {
            "type": "object",
            "required": ["role"],
            "additionalProperties": False,
            "properties": {"role": {"const": "admin"}, **_COMMON},
        },
        {
            "type": "object",
            "required": ["role", "project"],
            "additionalProperties": False,
            "properties": {"role": {"enum": ["member", "reader"]}, "project": PROJECT, **_COMMON},
        },
    ]
}
TOKENS = {"type": "array", "items": OBJ}


def access_paths() -> dict[str, Any]:
    return {
        "/v1/tokens": {
            "post": op(
                "A new API token with a project and a role; its value is in this answer only",
                ADMIN,
                {"201": json_body(OBJ), **errors(401, body=True)},
                requestBody=request_body(TOKEN_REQUEST),
            ),
            "get": op(
                "Every API token (never their values)", ADMIN, {"200": json_body(TOKENS), **errors(401)}
            ),
        },
        "/v1/tokens/{id}": {
            "parameters": [path_param("id", "the token's id (`anneal token list`)")],
            "delete": op(
                "Revoke a token: refused by every process from its next request on",
                ADMIN,
                {"200": json_body(OBJ), **errors(401, 404)},
            ),
        },
        "/v1/audit": {
            "get": op(
                "The audit log: mutating requests, who made them, when, and their status; oldest first",
                ADMIN,
                {"200": json_body(TOKENS), **errors(401)},
                parameters=[
                    query(
                        "since", "from this time: ISO 8601 (2026-11-26T10:00:00Z) or epoch seconds", MOMENT
                    ),
                    query("limit", "the newest N rows (default 100)", integer(1)),
                ],
            )
        },
    }
