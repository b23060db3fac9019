"""What every route shares: default-deny authentication, errors as JSON, request helpers.

Every route declares who may call it (``public``; ``read``, ``write`` or ``admin`` by a token's
role, control/principal.py; ``metrics``, ``agent``, ``signal``; the web view's ``ui`` and
``ui-page``, by its session cookie, and ``ui-write``, which also needs a member's or an admin's
session and its form token); a route without a declaration answers 403. Domain errors become
``{"error": {"code", "message", "where"}}`` with their HTTP status.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm.exc import StaleDataError

from agent.serving import LINGER
from control.api import diskfull, ownership
from control.api.app_keys import BEFORE_LINGER, PRINCIPAL, RUNTIME
from control.api.body import check_text
from control.api.principal import resolve as principal_of
from control.api.ui import session as ui_session
from control.errors import (
    AuthError,
    BadRequestError,
    ControlError,
    ForbiddenError,
    UnavailableError,
)
from control.hot import taint
from control.hot.errors import TemplateError
from control.keys import token_hash
from control.principal import Principal
from control.runtime import Runtime
from control.services import agents, tokens
from control.store.db import raced

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
AUTH_SERVER = web.RequestKey("server_id", str)
#: Policies a token's Principal passes, by role.
ROLE_POLICIES = {"read": ("admin", "member", "reader"), "write": ("admin", "member"), "admin": ("admin",)}
#: The SHA-256 of the agent credential that authenticated the request (agent and signal routes).
AUTH_CREDENTIAL = web.RequestKey("credential_hash", str)
#: Refusals sent before the body was read: the connection is closed after them.
CLOSE_AFTER = frozenset({408, 411, 413})
#: The largest integer a query may give: the database's integer columns are 32-bit on PostgreSQL.
MAX_INT = 2**31 - 1
#: Methods named in the request metrics; any other is ``other`` (a client picks the method: bound the labels).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def auth(policy: str) -> Callable[[Handler], Handler]:
    """Declare who may call a route: public, read, write, admin, metrics (its token or the admin's), agent,
    signal, ui, ui-page or ui-write (a member's or admin's session with its form token)."""

    def mark(handler: Handler) -> Handler:
        handler.anneal_auth = policy  # type: ignore[attr-defined]
        return handler

    return mark


def changes_nothing(handler: Handler) -> Handler:
    """Mark a POST/PUT/PATCH route that only reads (a plan, a preview, a validation): it is not audited,
    so a dry run leaves the database exactly as it was."""
    handler.anneal_changes_nothing = True  # type: ignore[attr-defined]
    return handler


def error_body(status: int, code: str, message: str, where: str | None) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message, "where": where}}, status=status)


@web.middleware
async def measure(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count and time every answer by route template, method and status (``aborted``: no answer)."""
    started, status = time.monotonic(), "aborted"
    try:
        response = await handler(request)
        status = str(response.status)
        return response
    except web.HTTPException as e:  # a redirect, or an error the errors middleware let through
        status = str(e.status)
        raise
    finally:
        runtime = request.app.get(RUNTIME)
        if runtime is not None:  # None only before the app's lifetime made it
            resource = request.match_info.route.resource
            route = resource.canonical if resource is not None else "unmatched"
            method = request.method if request.method in METHODS else "other"
            runtime.metrics.requests.labels(route, method, status).inc()
            runtime.metrics.request_seconds.labels(route, method).observe(time.monotonic() - started)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure into a JSON error; only a bug gives a 500."""
    try:
        return await handler(request)
    except ControlError as e:
        return await answer_error(request, e)
    except TemplateError as e:
        return error_body(400, "invalid_template", str(e), e.path)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        response = error_body(e.status, "http", e.reason, request.path)
        if "Allow" in e.headers:  # a 405 names the methods the route takes (RFC 9110, section 15.5.6)
            response.headers["Allow"] = e.headers["Allow"]
        if request.body_exists and not request.content.is_eof():  # an unknown route's body: unread
            return await close_after(request, response)
        return response
    except Exception as e:
        return await _failure(request, e)


async def _failure(request: web.Request, e: Exception) -> web.StreamResponse:
    """A concurrent write (409), a busy database or a full disk (503), or a bug (500, logged)."""
    settings = request.app[RUNTIME].settings
    if isinstance(e, DBAPIError | StaleDataError):
        request.app[RUNTIME].metrics.database_error("api", e)
    if isinstance(e, IntegrityError):
        log.info("conflicting write on %s %s: %s", request.method, request.path, e)
        return error_body(409, "conflict", "the request conflicts with a concurrent change", None)
    full = None
    if isinstance(e, OSError):
        full = diskfull.from_os_error(e, settings)
    elif isinstance(e, DBAPIError):
        full = diskfull.from_database(e, settings)
    if full is not None:
        log.warning("disk full on %s %s: %s", request.method, request.path, full.where)
        return await answer_error(request, full)
    if raced(e):  # busy, a lost row-version race, a PostgreSQL deadlock
        log.warning("database unavailable on %s %s: %s", request.method, request.path, e)
        busy = UnavailableError("busy or raced a concurrent change; retry later", where="database")
        return await answer_error(request, busy)
    if isinstance(e, ConnectionError):  # the client went away: not a bug, and no one to answer
        log.info("connection lost during %s %s: %s", request.method, request.path, e)
        return error_body(400, "bad_request", "the connection closed before the request was complete", None)
    log.exception("unhandled error on %s %s", request.method, request.path)
    return error_body(500, "internal", "internal error; see the control plane's log", None)


async def answer_error(request: web.Request, e: ControlError) -> web.StreamResponse:
    """A domain error's answer, with the headers its status calls for."""
    response = error_body(e.status, e.code, e.message, e.where)
    if e.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="anneal"'
    if e.status == 503:
        response.headers["Retry-After"] = "5"
    if e.status in CLOSE_AFTER or (request.body_exists and not request.content.is_eof()):
        return await close_after(request, response)
    return response


async def close_after(request: web.Request, response: web.Response) -> web.StreamResponse:
    """Send *response*, then close the connection without reading the body it refused (RFC 9112, 9.6).

    The write side is shut after the answer, so a client sees the end at once; reading stops, so
    what it still sends costs no memory here; LINGER seconds later the connection is closed.
    """
    response.force_close()
    if (before := request.get(BEFORE_LINGER)) is not None:
        await before(response.status)
    if request.transport is None or request.transport.is_closing():
        return response  # the client is gone: aiohttp drops the answer quietly
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        return response
    request.content.read_nowait()  # what arrived already is dropped, not held for LINGER seconds
    transport = request.transport
    if transport is not None and not transport.is_closing():
        transport.pause_reading()
        if transport.can_write_eof():
            transport.write_eof()
        await asyncio.sleep(LINGER)
    return response


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Default deny: each route names its policy; nothing else gets through."""
    route_handler = request.match_info.route.handler
    policy = getattr(route_handler, "anneal_auth", None)
    if request.match_info.http_exception is not None:
        return await handler(request)
    check_parameters(request)
    if policy == "public":
        return await handler(request)
    token = _bearer(request)
    rt = request.app[RUNTIME]
    if policy in ROLE_POLICIES:
        await _principal(request, rt, token, policy)
        await ownership.check_operator(request, request[PRINCIPAL])
    elif policy == "metrics":
        if token is None or not _metrics_reader(token, rt.keys.admin_token, rt.keys.metrics_token):
            raise AuthError("this route needs the metrics token or the admin token", where="Authorization")
    elif policy in ("ui", "ui-page", "ui-write"):
        request[PRINCIPAL] = await _ui_principal(request, policy)
        if policy == "ui-write":
            _ui_may_change(request, request[PRINCIPAL], rt.keys.admin_token)
        await ownership.check_operator(request, request[PRINCIPAL])
    elif policy in ("agent", "signal"):
        if token is not None:
            request[AUTH_CREDENTIAL] = token_hash(token)
            request[AUTH_SERVER] = await agents.authenticate(rt, request[AUTH_CREDENTIAL])
        elif policy == "agent" or "sig" not in request.query:
            raise AuthError("this route needs the agent's credential", where="Authorization")
    else:
        raise ForbiddenError("route has no access policy", where=request.path)
    return await handler(request)


async def _principal(request: web.Request, rt: Runtime, token: str | None, policy: str) -> None:
    """The token's Principal into the request, if its role passes *policy* (401 without one, 403 for too
    little a role: that refusal is audited)."""
    principal = await principal_of(rt, token)
    if principal is None:
        raise AuthError(
            "this route needs a token (the admin token or one `anneal token create` made)",
            where="Authorization",
        )
    request[PRINCIPAL] = principal
    if principal.role not in ROLE_POLICIES[policy]:
        needs = "the admin role" if policy == "admin" else "the member or admin role"
        raise ForbiddenError(
            f"this route needs {needs}; the token's role is {principal.role}", where="Authorization"
        )


async def _ui_principal(request: web.Request, policy: str) -> Principal:
    """The web view's session (its stored token still valid); a page without one goes to the login form,
    data gets a 401."""
    rt = request.app[RUNTIME]
    found = await _session_principal(rt, request.cookies.get(ui_session.COOKIE))
    if found is not None:
        return found
    if policy == "ui-page":
        raise web.HTTPSeeOther("/ui/login")
    raise AuthError("this view needs a login at /ui/login (its session cookie)", where="cookie")


async def _session_principal(rt: Runtime, cookie: str | None) -> Principal | None:
    """The session's Principal while what it was made from still holds: its stored token not revoked,
    its external token still valid at the validator (as that answers now: a changed role shows)."""
    found = ui_session.read(cookie, rt.keys.admin_token, time.time())
    if found is None:
        return None
    principal, external = found
    if external is not None:
        token = ui_session.open_external(rt.keys.data_key, external)
        return None if token is None or rt.validator is None else await rt.validator(token)
    if principal.token_id is not None and not await tokens.still_valid(rt, principal.token_id):
        return None
    return principal


def _ui_may_change(request: web.Request, principal: Principal, admin_token: str) -> None:
    """A web view control: a member's or an admin's session, and the session's form token (CSRF)."""
    if not principal.can_write:
        raise ForbiddenError(f"the session's role ({principal.role}) may not change anything", where="role")
    expected = ui_session.form_token(admin_token, request.cookies.get(ui_session.COOKIE, ""))
    given = request.headers.get(ui_session.FORM_HEADER, "")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise ForbiddenError(
            f"{ui_session.FORM_HEADER}: the session's form token is missing or wrong",
            where=ui_session.FORM_HEADER,
        )


def _metrics_reader(token: str, admin: str, metrics: str) -> bool:
    """Whether *token* is the admin token or the metrics token (both compared in constant time)."""
    given = token.encode()
    is_admin = hmac.compare_digest(given, admin.encode())
    is_metrics = bool(metrics) and hmac.compare_digest(given, metrics.encode())
    return is_admin or is_metrics


def check_parameters(request: web.Request) -> None:
    """Refuse path and query parameters that are not valid text (a lone surrogate), naming them."""
    for name, value in request.match_info.items():
        check_text(value, name)
    for name, value in request.query.items():
        check_text(name, "query")
        check_text(value, name)


def _bearer(request: web.Request) -> str | None:
    """The bearer token; every credential Anneal issues is ASCII, so any other is refused here."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    token = value.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    if not token.isascii():
        raise AuthError("Authorization: a bearer token is ASCII; this one is not", where="Authorization")
    return token


def ok(data: Any, status: int = 200) -> web.Response:
    """*data* as JSON; a Secret that reached an answer anyway is shown masked, never in clear."""
    return web.json_response(data, status=status, dumps=taint.dumps_masked)


def int_query(request: web.Request, name: str, default: int) -> int:
    found = optional_int_query(request, name)
    return default if found is None else found


def optional_int_query(request: web.Request, name: str, least: int = 0) -> int | None:
    """An integer from *least* to MAX_INT (what every integer column holds, PostgreSQL's int4 too)."""
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError as e:
        raise BadRequestError(f"{name}: expected an integer, got {raw[:40]!r}", where=name) from e
    if not least <= value <= MAX_INT:
        raise BadRequestError(f"{name}: expected an integer from {least} to {MAX_INT}", where=name)
    return value


def bool_query(request: web.Request, name: str) -> bool:
    raw = request.query.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise BadRequestError(f"{name}: expected true or false, got {raw!r}", where=name)
    return raw in ("true", "1")


def seconds_query(request: web.Request, name: str) -> float:
    """A number of seconds, 0 or more, from the query; 0 when absent (the caller caps it)."""
    raw = request.query.get(name, "0")
    try:
        value = float(raw)
    except ValueError as e:
        raise BadRequestError(f"{name}: expected seconds, got {raw[:40]!r}", where=name) from e
    if not value >= 0:  # negative, or NaN
        raise BadRequestError(f"{name}: expected 0 or more seconds, got {raw[:40]!r}", where=name)
    return value


def time_query(request: web.Request, name: str) -> float | None:
    """A moment from the query: ISO 8601 (UTC unless it names a zone) or seconds since the epoch."""
    raw = request.query.get(name)
    if not raw:  # absent, or empty as a form leaves it: no bound
        return None
    try:
        return float(raw) if raw.replace(".", "", 1).isdigit() else _iso_seconds(raw)
    except ValueError as e:
        raise BadRequestError(
            f"{name}: expected an ISO 8601 time (2026-11-26T10:00:00Z) or epoch seconds, got {raw[:40]!r}",
            where=name,
        ) from e


def _iso_seconds(text: str) -> float:
    # RFC 3339 also allows a lower-case "t" and "z", and a leap second (read as the second before).
    moment = datetime.fromisoformat(re.sub(r"(T\d\d:\d\d):60", r"\1:59", text.upper()))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
