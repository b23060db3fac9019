"""The components of the OpenAPI description: the schemas of request and response bodies."""

from __future__ import annotations

from typing import Any

OBJ: dict[str, Any] = {"type": "object"}
STRING = {"type": "string"}
# The Error body's `code`: every code the error middleware answers (ControlError's and its own).
_CODES = (
    "bad_request, invalid_template (a template, environment or parameter; where: its path) 400; "
    "unauthorized 401; forbidden 403; not_found 404; conflict, stale_signal 409; gone 410; too_large 413; "
    "unavailable 503 (the database is busy: retry after Retry-After); internal 500 (a bug); "
    "http: refused before any route ran, e.g. an unknown path or method (where: the path)"
)


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def object_schema(*required: str, **properties: Any) -> dict[str, Any]:
    """An object schema with these properties, the *required* ones listed."""
    return {"type": "object", **({"required": list(required)} if required else {}), "properties": properties}


def strings(*names: str) -> dict[str, Any]:
    """String properties, for object_schema."""
    return dict.fromkeys(names, STRING)


def schemas() -> dict[str, Any]:
    integer, nullable = {"type": "integer"}, {"type": ["string", "null"]}
    code = {"type": "string", "description": _CODES}
    return {
        "Error": object_schema("error", error=object_schema(code=code, message=STRING, where=nullable)),
        "StackRequest": object_schema(
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
        "Stack": object_schema(
            **strings("id", "name", "status", "status_reason"),
            version=integer,
            traversal=integer,
            rollback={"type": "boolean"},
            parameters=OBJ,
            **{"parent": nullable, "parent_resource": nullable, "nested_depth": integer},
        ),
        "Output": object_schema(output_key=STRING, output_value={}, description=STRING),
        "Event": object_schema(
            id=integer,
            timestamp={"type": "number"},
            **strings("resource_name", "stack_name", "action", "status", "reason"),
            deployment_id=nullable,
            generation={"type": ["integer", "null"]},
            traversal=integer,
        ),
        "Deployment": object_schema(
            **strings("id", "name", "server_id", "action", "status", "status_reason"),
            generation=integer,
            progress={
                "type": ["object", "null"],
                "description": "the last progress signal: seq, output_tail, output_bytes, elapsed, at",
            },
        ),
        "Signal": {
            **object_schema(
                **strings("deploy_stdout", "deploy_stderr"),
                deploy_status_code={"type": ["integer", "string"]},
            ),
            "additionalProperties": True,
        },
    }
