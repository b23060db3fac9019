"""The pieces /openapi.json is built from: schemas, responses, parameters (``openapi`` and ``openapi_heat``)."""

from __future__ import annotations

from typing import Any

OBJ: dict[str, Any] = {"type": "object"}
STRING = {"type": "string"}
ADMIN = "admin"
ERRORS = {
    400: "Invalid input",
    401: "No or wrong credential",
    403: "Credential out of scope",
    404: "Not found",
    409: "Conflict with the current state",
    410: "What the credential was for no longer exists",
    413: "Over a size cap",
    503: "unavailable: the database is busy or the request raced a concurrent change; retry later",
}
INVALID_TEMPLATE = "Invalid input; invalid_template: the template, an environment or a parameter is wrong"
# The Error body's `code`: every code the error middleware answers (ControlError's and its own).
CODES = (
    "bad_request, invalid_template (a template, environment or parameter; where: its path) 400; "
    "unauthorized 401; forbidden 403; not_found 404; conflict, stale_signal 409; gone 410; too_large 413; "
    "unavailable 503 (the database is busy: retry after Retry-After); internal 500 (a bug); "
    "http: refused before any route ran, e.g. an unknown path or method (where: the path)"
)
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_of(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def errors(*codes: int, busy: bool = True, template: bool = False) -> dict[str, Any]:
    """Error responses; *busy*: the operation uses the database, *template*: it parses a template."""
    text = {**ERRORS, 400: INVALID_TEMPLATE} if template else ERRORS
    responses = {str(c): json_of(ref("Error"), text[c]) for c in codes}
    if busy:
        responses["503"] = {**json_of(ref("Error"), text[503]), "headers": RETRY_AFTER}
    return responses


def op(summary: str, security: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    op["security"] = [] if security == "public" else [{security: []}]
    op.update(extra)
    return op


def path_param(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": description, "schema": STRING}


def query(name: str, description: str, type_: str = "string") -> dict[str, Any]:
    schema = {"type": type_}
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


def body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def obj(*required: str, **properties: Any) -> dict[str, Any]:
    """An object schema with these properties, the *required* ones listed."""
    return {"type": "object", **({"required": list(required)} if required else {}), "properties": properties}


def strings(*names: str) -> dict[str, Any]:
    """String properties, for obj."""
    return dict.fromkeys(names, STRING)
