"""Heat's boundary: the token, the project in the path, Heat's error body, its query parameters.

Every route declares its policy with ``control.api.middleware.auth`` as the operator's
routes do (``public`` or ``project``); a route without one answers 403. ``project``
routes take a token in ``X-Auth-Token`` (as keystoneauth's admin_token sends it) or
``Authorization: Bearer``, resolved as every API resolves it (control/api/principal.py).
The path's project must be the token's (an admin's token may name any); the caller and
that project go into ``request[SCOPE]``. A reader's token may only read (GET and HEAD).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from sqlalchemy.exc import IntegrityError

from control.api import ownership
from control.api.app_keys import PRINCIPAL, RUNTIME
from control.api.middleware import Handler
from control.api.principal import resolve
from control.errors import (
    AuthError,
    BadRequestError,
    ConflictError,
    ControlError,
    ForbiddenError,
    GoneError,
    NotFoundError,
    TooLargeError,
    UnavailableError,
)
from control.hot import taint
from control.hot.errors import TemplateError
from control.principal import ADMIN, Principal, Within
from control.store.db import raced

log = logging.getLogger(__name__)

#: webob's title and explanation for each status Heat answers with.
_TITLES = {
    400: (
        "Bad Request",
        "The server could not comply with the request since it is either malformed or otherwise incorrect.",
    ),
    401: (
        "Unauthorized",
        "This server could not verify that you are authorized to access the document you requested.",
    ),
    403: ("Forbidden", "Access was denied to this resource."),
    404: ("Not Found", "The resource could not be found."),
    405: ("Method Not Allowed", "The method is not allowed for this resource."),
    409: ("Conflict", "There was a conflict when trying to complete your request."),
    410: ("Gone", "This resource is no longer available."),
    413: ("Request Entity Too Large", "The body of your request was too large for this server."),
    415: ("Unsupported Media Type", "The request media type is not supported by this server."),
    500: (
        "Internal Server Error",
        "The server has either erred or is incapable of performing the requested operation.",
    ),
    503: (
        "Service Unavailable",
        "The server is currently unavailable. Please retry your request after some time.",
    ),
}
#: Heat's exception names (heat/api/middleware/fault.py) for ours.
_TYPES: tuple[tuple[type[Exception], str], ...] = (
    (TooLargeError, "RequestLimitExceeded"),
    (BadRequestError, "HTTPBadRequest"),
    (AuthError, "HTTPUnauthorized"),
    (ForbiddenError, "Forbidden"),
    (NotFoundError, "EntityNotFound"),
    (ConflictError, "ActionInProgress"),
    (GoneError, "HTTPGone"),
    (UnavailableError, "HTTPServiceUnavailable"),
)


@dataclass(frozen=True)
class Scope:
    """Who calls and for which project: the path's project id (a project exists once something is made in it)."""

    project: str
    principal: Principal = ADMIN


SCOPE = web.RequestKey("heat_scope", Scope)


def heat_error(status: int, kind: str, message: str) -> web.Response:
    """Heat's error body; the traceback is never sent."""
    title, explanation = _TITLES.get(status, _TITLES[500])
    body = {
        "code": status,
        "title": title,
        "explanation": explanation,
        "error": {"message": message, "type": kind, "traceback": None},
    }
    return json_response(body, status=status)


def challenge(keystone_url: str) -> str:
    """A 401's WWW-Authenticate: Keystone's URI when tokens are validated there (as keystonemiddleware
    sends it), else a bearer token."""
    return f'Keystone uri="{keystone_url}"' if keystone_url else 'Bearer realm="anneal"'


def error_type(e: ControlError) -> str:
    if isinstance(e, ConflictError) and e.where == "name" and "already exists" in e.message:
        return "StackExists"
    return next((name for cls, name in _TYPES if isinstance(e, cls)), "HTTPInternalServerError")


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:  # noqa: PLR0911
    """Every failure as Heat's error body; only a bug gives a 500."""
    try:
        return await handler(request)
    except ControlError as e:
        response = heat_error(e.status, error_type(e), e.message)
        if e.status == 401:
            response.headers["WWW-Authenticate"] = challenge(request.app[RUNTIME].settings.keystone_url)
        elif e.status == 503:
            response.headers["Retry-After"] = "5"
        return response
    except TemplateError as e:
        return heat_error(400, "StackValidationFailed", str(e))
    except web.HTTPRequestEntityTooLarge:
        cap = request.app[RUNTIME].settings.request_cap
        return heat_error(413, "RequestLimitExceeded", f"Request body is over the cap of {cap} bytes")
    except IntegrityError as e:
        log.info("conflicting write on %s %s: %s", request.method, request.path, e)
        return heat_error(409, "Conflict", "The request conflicts with a concurrent change")
    except web.HTTPException as e:
        if e.status < 400:
            raise
        response = heat_error(e.status, "HTTP" + e.reason.replace(" ", ""), f"{e.reason}: {request.path}")
        if "Allow" in e.headers:
            response.headers["Allow"] = e.headers["Allow"]
        return response
    except Exception as e:
        if raced(e):  # busy, a lost row-version race, a PostgreSQL deadlock
            log.warning("database unavailable on %s %s: %s", request.method, request.path, e)
            response = heat_error(
                503, "HTTPServiceUnavailable", "Busy or raced a concurrent change; retry later"
            )
            response.headers["Retry-After"] = "5"
            return response
        log.exception("unhandled error on %s %s", request.method, request.path)
        return heat_error(500, "HTTPInternalServerError", "Internal error; see the control plane's log")


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Default deny: ``public`` routes pass, ``project`` routes need the token; nothing else gets through."""
    policy = getattr(request.match_info.route.handler, "anneal_auth", None)
    if request.match_info.http_exception is not None or policy == "public":
        return await handler(request)
    if policy != "project":
        raise ForbiddenError("route has no access policy", where=request.path)
    token = request.headers.get("X-Auth-Token", "").strip() or _bearer(request)
    principal = await resolve(request.app[RUNTIME], token if token.isascii() else None)
    if principal is None:
        raise AuthError("Authentication required: X-Auth-Token is not a valid token", where="X-Auth-Token")
    request[PRINCIPAL] = principal  # known from here on: a refusal below is audited
    project = request.match_info["project_id"]
    if not principal.sees(project):
        raise ForbiddenError(f"The token's project is not {project}", where="project_id")
    if not principal.can_write and request.method not in ("GET", "HEAD"):
        raise ForbiddenError("The token's role (reader) may not change anything", where="X-Auth-Token")
    await ownership.check_heat(request, principal)
    request[SCOPE] = Scope(project=project, principal=principal)
    return await handler(request)


def _bearer(request: web.Request) -> str:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def seen(request: web.Request) -> str | None:
    """The project a listing shows: the path's, or None (every project) for an admin's token."""
    found = request[SCOPE]
    return None if found.principal.admin else found.project


def scope(request: web.Request) -> Scope:
    return request[SCOPE]


def within(request: web.Request) -> Within:
    """Where stack and server names resolve: the path's project (an admin's name not there: control/principal.py)."""
    found = request[SCOPE]
    return found.principal.within(found.project)


# ------------------------------------------------------------------ Heat's query parameters


def bool_param(request: web.Request, name: str, default: bool = False) -> bool:
    """Heat's extract_bool: true/false, yes/no, 1/0, any case."""
    raw = request.query.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "yes", "1", "t", "y", "on"):
        return True
    if value in ("false", "no", "0", "f", "n", "off"):
        return False
    raise BadRequestError(
        f'Unrecognized value "{raw}" for "{name}", acceptable values are: true, false', where=name
    )


def int_param(request: web.Request, name: str) -> int | None:
    """Heat's extract_int: a non-negative integer, or None when absent."""
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError as e:
        raise BadRequestError(f"Only integer is acceptable by '{name}'.", where=name) from e
    if value < 0:
        raise BadRequestError(f"Only non-negative integer is acceptable by '{name}'.", where=name)
    return value


def mixed_param(request: web.Request, name: str) -> list[str]:
    """Every value a query gives for *name* (a filter may be repeated: ``status=A&status=B``)."""
    return [v for v in request.query.getall(name, []) if v]


def sort_dir(request: web.Request) -> str | None:
    raw = request.query.get("sort_dir")
    if raw is None:
        return None
    if raw.lower() not in ("asc", "desc"):
        raise BadRequestError(f"sort_dir: expected asc or desc, got {raw!r}", where="sort_dir")
    return raw.lower()


def refuse_unknown(request: web.Request, allowed: Iterable[str]) -> None:
    """Heat refuses a filter it does not know rather than ignoring it."""
    unknown = sorted(set(request.query) - set(allowed))
    if unknown:
        raise BadRequestError(f"Invalid filter parameters {unknown}", where=unknown[0])


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON body typed `application/json` with no charset parameter, as Heat sends it (clients compare);
    a Secret that reached it anyway shows masked, as in /v1's answers."""
    body = taint.dumps_masked(data).encode()
    return web.Response(body=body, status=status, headers=headers, content_type="application/json")
