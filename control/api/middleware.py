"""What every route shares: default-deny authentication, errors as JSON, request helpers.

Every route declares who may call it (``public``, ``admin``, ``agent``,
``signal``); a route without a declaration answers 403. Domain errors become
``{"error": {"code", "message", "where"}}`` with their HTTP status.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm.exc import StaleDataError

from control.api.app_keys import RUNTIME
from control.errors import AuthError, BadRequestError, ControlError, ForbiddenError, TooLargeError
from control.hot import taint
from control.hot.errors import TemplateError
from control.keys import token_hash
from control.services import agents

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
AUTH_SERVER = "anneal.server_id"
#: The SHA-256 of the agent credential that authenticated the request (agent and signal routes).
AUTH_CREDENTIAL = "anneal.credential_hash"


def auth(policy: str) -> Callable[[Handler], Handler]:
    """Declare who may call a route: public, admin, agent or signal."""

    def mark(handler: Handler) -> Handler:
        handler.anneal_auth = policy  # type: ignore[attr-defined]
        return handler

    return mark


def error_body(status: int, code: str, message: str, where: str | None) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message, "where": where}}, status=status)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:  # noqa: PLR0911
    """Turn every failure into a JSON error; only a bug gives a 500."""
    try:
        return await handler(request)
    except ControlError as e:
        return error_body(e.status, e.code, e.message, e.where)
    except TemplateError as e:
        return error_body(400, "invalid_template", str(e), e.path)
    except web.HTTPRequestEntityTooLarge:
        cap = request.app[RUNTIME].settings.request_cap
        return error_body(413, "too_large", f"request body is over the cap of {cap} bytes", "body")
    except IntegrityError as e:
        log.info("conflicting write on %s %s: %s", request.method, request.path, e)
        return error_body(409, "conflict", "the request conflicts with a concurrent change", None)
    except (OperationalError, StaleDataError) as e:
        log.warning("database unavailable on %s %s: %s", request.method, request.path, e)
        response = error_body(503, "unavailable", "busy or raced a concurrent change; retry later", None)
        response.headers["Retry-After"] = "5"
        return response
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return error_body(e.status, "http", e.reason, request.path)
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_body(500, "internal", "internal error; see the control plane's log", None)


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Default deny: each route names its policy; nothing else gets through."""
    route_handler = request.match_info.route.handler
    policy = getattr(route_handler, "anneal_auth", None)
    if request.match_info.http_exception is not None or policy == "public":
        return await handler(request)
    token = _bearer(request)
    rt = request.app[RUNTIME]
    if policy == "admin":
        if token is None or not hmac.compare_digest(token, rt.keys.admin_token):
            raise AuthError("this route needs the admin token", where="Authorization")
    elif policy in ("agent", "signal"):
        if token is not None:
            request[AUTH_CREDENTIAL] = token_hash(token)
            request[AUTH_SERVER] = await agents.authenticate(rt, request[AUTH_CREDENTIAL])
        elif policy == "agent" or "sig" not in request.query:
            raise AuthError("this route needs the agent's credential", where="Authorization")
    else:
        raise ForbiddenError("route has no access policy", where=request.path)
    return await handler(request)


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def read_json(request: web.Request, cap: int | None = None) -> Any:
    raw = await request.read()
    if cap is not None and len(raw) > cap:
        raise TooLargeError(f"body is {len(raw)} bytes, over the cap of {cap} bytes", where="body")
    if not raw:
        raise BadRequestError("body: a JSON object is required", where="body")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequestError(f"body: not JSON: {e}", where="body") from e


async def read_object(request: web.Request, cap: int | None = None) -> dict[str, Any]:
    """The JSON body, which must be an object."""
    body = await read_json(request, cap)
    if not isinstance(body, dict):
        raise BadRequestError("body: expected an object", where="body")
    return body


def ok(data: Any, status: int = 200) -> web.Response:
    """*data* as JSON; a Secret that reached an answer anyway is shown masked, never in clear."""
    return web.json_response(data, status=status, dumps=_dumps)


def _dumps(data: Any) -> str:
    return json.dumps(data, default=_masked)


def _masked(value: Any) -> Any:
    if isinstance(value, taint.Secret):
        return taint.MASK
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def int_query(request: web.Request, name: str, default: int) -> int:
    found = optional_int_query(request, name)
    return default if found is None else found


def optional_int_query(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError as e:
        raise BadRequestError(f"{name}: expected an integer, got {raw!r}", where=name) from e


def bool_query(request: web.Request, name: str) -> bool:
    raw = request.query.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise BadRequestError(f"{name}: expected true or false, got {raw!r}", where=name)
    return raw in ("true", "1")


def seconds_query(request: web.Request, name: str) -> float:
    """A non-negative number of seconds from the query, 0 when absent."""
    raw = request.query.get(name, "0")
    try:
        value = float(raw)
    except ValueError as e:
        raise BadRequestError(f"{name}: expected seconds, got {raw!r}", where=name) from e
    return max(0.0, value)
