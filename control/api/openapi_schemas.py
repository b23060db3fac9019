"""The components of the OpenAPI description: the schemas of request and response bodies."""

from __future__ import annotations

from typing import Any

from control.api.openapi_parts import CODES as _CODES
from control.api.openapi_parts import OBJ, STRING, strings
from control.api.openapi_parts import obj as object_schema


def schemas() -> dict[str, Any]:
    integer, nullable = {"type": "integer"}, {"type": ["string", "null"]}
    code = {"type": "string", "description": _CODES}
    return {
        "Error": object_schema("error", error=object_schema(code=code, message=STRING, where=nullable)),
        "StackRequest": object_schema(
            name=STRING,
            template={"oneOf": [STRING, OBJ]},
            files={"type": "object", "additionalProperties": {"oneOf": [STRING, OBJ]}},
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
