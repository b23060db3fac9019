"""The parts /openapi.json is built from: responses, parameters and the component schemas.

Each schema is as strict as the handler that reads it (tests/integration/test_api_fuzz.py
sends schema-valid requests and checks none is refused as malformed). What the handlers check
beyond a schema, a template's meaning above all, is said in the descriptions.
"""

from __future__ import annotations

from typing import Any

OBJ: dict[str, Any] = {"type": "object"}
STRING = {"type": "string"}
ADMIN = "admin"
#: A moment in a query (middleware.time_query): ISO 8601, epoch seconds, or empty for no bound.
MOMENT = {
    "anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "string", "pattern": "^[0-9]{1,12}([.][0-9]{1,9})?$"},
        {"type": "string", "maxLength": 0},
    ]
}
#: The largest integer a query or path may give (the database's 32-bit integer columns).
MAX_INT = 2**31 - 1
#: Stack and server names: one grammar (docs/templates.md, "Names"; control/hot/names.py).
STACK_NAME = {
    "type": "string",
    "pattern": "^[A-Za-z][A-Za-z0-9_.-]{0,254}$",
    "description": "a letter, then letters, digits, '_', '-', '.' (255 at most)",
}
SERVER_NAME = STACK_NAME
TRANSPORTS = ("HTTP", "SWIFT", "S3", "LOCAL", "RELAY", "POLL_SERVER_CFN", "POLL_SERVER_HEAT", "POLL_TEMP_URL")
TRANSPORT = {
    "type": "string",
    "enum": list(TRANSPORTS),
    "description": "one of these (any case); a store transport must be configured on this control plane",
}
#: A raw 32-byte public key in base64, as the agent makes them (agent/keys.py).
PUBLIC_KEY = {"type": "string", "pattern": "^[A-Za-z0-9+/]{43}=$"}
PUBLIC_KEYS = {
    "type": "object",
    "required": ["sign", "box"],
    "properties": {"sign": PUBLIC_KEY, "box": PUBLIC_KEY},
}
NON_EMPTY = {"type": "string", "minLength": 1}
_ERRORS = {
    400: "Invalid input: a body, a parameter or a header, named in `where`",
    401: "No or wrong credential (WWW-Authenticate: Bearer)",
    403: "Credential out of scope",
    404: "Not found",
    408: "The body did not arrive within --body-timeout (the connection is closed)",
    409: "Conflict with the current state",
    410: "What the credential was for no longer exists",
    411: "An unauthenticated body must send Content-Length",
    413: "Over a size cap (the connection is closed)",
    503: "unavailable: the database is busy or the request raced a concurrent change; disk_full: "
    "a disk is full, named in `where`; retry later",
}
_INVALID_TEMPLATE = "Invalid input; invalid_template: the template, an environment or a parameter is wrong"
# The Error body's `code`: every code the error middleware answers (ControlError's and its own).
_CODES = (
    "bad_request, invalid_template (a template, environment or parameter; where: its path) 400; "
    "unauthorized 401; forbidden 403; not_found 404; too_slow 408; conflict, stale_signal 409; gone 410; "
    "length_required 411; too_large 413; unavailable (busy: retry after Retry-After), disk_full (where: "
    "the database or the file) 503; internal 500 (a bug); "
    "http: refused before any route ran, e.g. an unknown path or method (where: the path)"
)
_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def errors(*codes: int, busy: bool = True, template: bool = False, body: bool = False) -> dict[str, Any]:
    """Error responses; *busy*: it uses the database, *template*: it parses one, *body*: it reads one."""
    text = {**_ERRORS, 400: _INVALID_TEMPLATE} if template else _ERRORS
    # Any parameter, path or query, can be malformed (a lone surrogate): every operation may answer 400.
    wanted = set(codes) | {400} | ({408, 413} if body else set())
    responses = {str(c): json_body(ref("Error"), text[c]) for c in sorted(wanted)}
    if 401 in wanted:
        responses["401"]["headers"] = {
            "WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}
        }
    if busy or 503 in wanted:
        responses["503"] = {**json_body(ref("Error"), text[503]), "headers": _RETRY_AFTER}
    return responses


def op(summary: str, security: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    if security == ADMIN and "401" in responses and "403" not in responses:  # a token of too little a role
        responses = {**responses, "403": json_body(ref("Error"), _ERRORS[403])}
    operation: dict[str, Any] = {"summary": summary, "responses": responses}
    operation["security"] = [] if security == "public" else [{security: []}]
    operation.update(extra)
    return operation


def path_param(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema or STRING,
    }


def query(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema or STRING,
    }


def integer(least: int = 0) -> dict[str, Any]:
    return {"type": "integer", "minimum": least, "maximum": MAX_INT}


def seconds(most: float | None = None) -> dict[str, Any]:
    """A number of seconds; larger values are cut to *most*, negative ones count as 0."""
    return {"type": "number", "minimum": 0, **({"description": f"at most {most:g}"} if most else {})}


def request_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def obj(*required: str, **properties: Any) -> dict[str, Any]:
    """An object schema with these properties, the *required* ones listed."""
    return {"type": "object", **({"required": list(required)} if required else {}), "properties": properties}


def strings(*names: str) -> dict[str, Any]:
    """String properties, for obj."""
    return dict.fromkeys(names, STRING)


def schemas() -> dict[str, Any]:
    whole, nullable = {"type": "integer"}, {"type": ["string", "null"]}
    code = {"type": "string", "description": _CODES}
    template = {
        "oneOf": [STRING, OBJ],
        "description": "HOT text (YAML or JSON) or object; checked like Heat's (400 invalid_template naming the path)",
    }
    stack_request = {
        "template": template,
        "files": {
            "type": "object",
            "additionalProperties": {"anyOf": [STRING, OBJ]},
            "description": "get_file targets: text, a binary file's envelope, or a directory's files",
        },
        "environments": {"type": "array", "items": STRING},
        "parameters": OBJ,
        "existing": {"type": "boolean"},
        "if_match": {"type": ["string", "integer"]},
        "rollback": {"type": "boolean"},
        "disable_rollback": {"type": "boolean"},
        "clear_parameters": {"type": "array", "items": STRING},
        "tags": {"type": "array", "items": STRING},
        "timeout_mins": {
            "type": "integer",
            "description": "minutes each create, update, rollback, delete, suspend or resume may take "
            '(then it fails "Timed out"; without it, `anneal serve --stack-timeout`); '
            "also the default timeout of the stack's deployments",
        },
    }
    return {
        "Error": obj("error", error=obj(code=code, message=STRING, where=nullable)),
        "StackRequest": obj("name", "template", name=STACK_NAME, **stack_request),
        # With `existing: true` the template may be left out: the stack keeps its own.
        "StackUpdate": obj(**stack_request),
        "Stack": obj(
            **strings("id", "name", "status", "status_reason"),
            version=whole,
            traversal=whole,
            rollback={"type": "boolean"},
            tags={"type": "array", "items": STRING},
            timeout_mins={"type": ["integer", "null"]},
            deadline={
                "type": ["string", "null"],
                "format": "date-time",
                "description": 'when the running action fails "Timed out" (UTC); null when none runs',
            },
            parameters=OBJ,
            parent=nullable,
            parent_resource=nullable,
            nested_depth=whole,
        ),
        "Output": obj(output_key=STRING, output_value={}, description=STRING),
        "Event": obj(
            id=whole,
            timestamp={"type": "number"},
            **strings("resource_name", "stack_name", "action", "status", "reason"),
            deployment_id=nullable,
            generation={"type": ["integer", "null"]},
            traversal=whole,
        ),
        "Deployment": obj(
            **strings("id", "name", "server_id", "action", "status", "status_reason"),
            generation=whole,
            progress={
                "type": ["object", "null"],
                "description": "the last progress signal: seq, output_tail, output_bytes, elapsed, at",
            },
            attempts={
                "type": ["array", "null"],
                "description": "with a retry policy, the current generation's attempts: attempt, "
                "status_code, started_at, ended_at, timed_out, stdout and stderr tails",
                "items": OBJ,
            },
        ),
        "Signal": {
            **obj(
                **strings("deploy_stdout", "deploy_stderr"),
                deploy_status_code={
                    "oneOf": [
                        {"type": "integer", "minimum": -(2**31), "maximum": MAX_INT},
                        {"type": "string", "pattern": "^-?[0-9]{1,9}$"},
                        {"type": "null"},
                    ],
                    "description": "out of range: the deployment fails with that reason and the signal gets 400",
                },
                anneal={
                    "type": "object",
                    "description": "Anneal's own fields: generation, nonce, config_id, status (protocol.md)",
                },
            ),
            "additionalProperties": True,
        },
    }


def adopt_request() -> dict[str, Any]:
    """What POST /v1/adopt takes: a name and what an abandon answered."""
    return obj(
        "name",
        "adopt_stack_data",
        name=STRING,
        adopt_stack_data={
            **obj("template", "resources", template=OBJ, resources=OBJ),
            "description": "what /v1/stacks/{name}/abandon answered (sealed values are opened)",
        },
        parameters=OBJ,
    )


def handover_request() -> dict[str, Any]:
    """Where an abandon hands the stack's servers: the receiving control plane's URL and keys."""
    key = {
        "type": "string",
        "pattern": "^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$",
        "description": "32 bytes, base64",
    }
    return obj(
        "to",
        "to_key",
        to={
            "type": "string",
            "pattern": "^https?://[^?]+$",
            "description": "the receiving control plane's URL; its agents move there",
        },
        to_key={
            **obj("public_key", "adopt_key", public_key=key, adopt_key=key),
            "description": "what `anneal key show -f json` (GET /v1/keys) prints on the receiving control plane",
        },
    )
