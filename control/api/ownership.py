"""The project check of every route that names a row: stacks, deployments, servers, configs.

Called by both APIs' authentication once the caller's Principal is known. An admin passes;
anyone else reaches a row of their own project only, and one of another project answers
404 exactly as a missing one does. A route of the operator's API or the web view that
names something this table does not know is refused to all but an admin (default deny).
"""

from __future__ import annotations

from aiohttp import web

from control.api.app_keys import PRINCIPAL, RUNTIME
from control.errors import ForbiddenError
from control.principal import DEFAULT_PROJECT, Principal, Within
from control.services import ownership
from control.services.ownership import Kind

#: Route prefixes of the operator's API and the web view, and the parameter naming the row.
_NAMED: tuple[tuple[str, Kind, str], ...] = (
    ("/stacks/{name}", "stack", "name"),
    ("/deployments/{id}", "deployment", "id"),
    ("/servers/{name}", "server", "name"),
)
OPERATOR = tuple(
    (prefix + path, kind, param) for prefix in ("/v1", "/ui/api", "/ui") for path, kind, param in _NAMED
)
#: Heat's path parameters that name a row (the others name parts of it, or nothing owned).
HEAT: tuple[tuple[str, Kind, str], ...] = (
    ("stack_id", "stack", "The Stack ({}) could not be found."),
    ("config_id", "config", "The config ({}) could not be found."),
    ("deployment_id", "deployment", "The deployment ({}) could not be found."),
    ("server_id", "server", "The server ({}) could not be found."),
)


def seen(request: web.Request) -> str | None:
    """The project a listing shows the caller: its own; an admin's: the one it names (``?project=``) or
    None (every project)."""
    principal = request[PRINCIPAL]
    return named(request) if principal.admin else principal.project


def owner(request: web.Request) -> str:
    """The project of what the caller makes through the operator's API: its own (an admin's: the one it
    names with ``?project=``, else the default)."""
    return request[PRINCIPAL].project or named(request) or DEFAULT_PROJECT


def within(request: web.Request) -> Within:
    """Where the caller's stack and server names resolve (control/principal.py): its own project; an
    admin's, the one it names with ``?project=`` first."""
    return request[PRINCIPAL].within(named(request))


def named(request: web.Request) -> str | None:
    """The project an admin names with ``?project=`` (ignored for anyone else: their project is their token's)."""
    return request.query.get("project") or None


async def check_operator(request: web.Request, principal: Principal) -> None:
    """A non-admin caller reaches only its own project's stacks, deployments and servers."""
    if principal.admin or not request.match_info:
        return
    canonical = request.match_info.route.resource.canonical if request.match_info.route.resource else ""
    for prefix, kind, param in OPERATOR:
        if canonical == prefix or canonical.startswith(prefix + "/"):
            ref = request.match_info[param]
            await _check(request, principal, kind, ref, f"{kind} {ref!r} not found")
            return
    if not canonical.startswith("/ui/static/"):
        raise ForbiddenError("this route needs the admin role", where=request.path)


async def check_heat(request: web.Request, principal: Principal) -> None:
    """A non-admin caller of Heat's API reaches only its own project's rows (the path's project is its own)."""
    if principal.admin:
        return
    params = request.match_info
    if "stack_name" in params and "stack_id" not in params:  # Heat's lookup by name or id
        ref = params["stack_name"]
        await _check(request, principal, "stack", ref, f"The Stack ({ref}) could not be found.")
    for param, kind, message in HEAT:
        if param in params:
            await _check(request, principal, kind, params[param], message.format(params[param]))


async def _check(request: web.Request, principal: Principal, kind: Kind, ref: str, message: str) -> None:
    assert principal.project is not None  # only an admin has none
    async with request.app[RUNTIME].sessions() as session:
        await ownership.check(session, kind, ref, principal.project, message)
