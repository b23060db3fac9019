"""The web view's pages: the login form, logout, one page shell for every view, the static files.

Every ``/ui`` answer carries a strict Content-Security-Policy (scripts and styles from this
site only, nothing inline) and refuses framing; pages are never cached.
"""

from __future__ import annotations

import html
import re
import time
from importlib import resources
from urllib.parse import parse_qs

from aiohttp import web

from control.api.app_keys import RUNTIME
from control.api.body import read_body
from control.api.middleware import auth
from control.api.principal import resolve
from control.api.ui import session
from control.principal import ADMIN

routes = web.RouteTableDef()

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
#: A static file's name: letters, digits, dots and dashes, no path.
STATIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,80}")
TYPES = {".js": "text/javascript", ".css": "text/css", ".txt": "text/plain", ".png": "image/png"}
#: A token is at most a few hundred bytes; a login form larger than this is refused unread.
LOGIN_CAP = 4096


async def secure_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: the browser rules for every answer under /ui."""
    if request.path == "/ui" or request.path.startswith("/ui/"):
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        if not request.path.startswith("/ui/static/"):
            response.headers["Cache-Control"] = "no-store"


def _static_text(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def login_page(error: str | None = None) -> str:
    """The login form, saying why the last attempt failed when it did."""
    notice = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    return _static_text("login.html").replace("<!--notice-->", notice)


@routes.get("/ui")
@auth("public")
async def ui_root(request: web.Request) -> web.Response:
    raise web.HTTPMovedPermanently("/ui/")


@routes.get("/ui/login")
@auth("public")
async def login_form(request: web.Request) -> web.Response:
    return web.Response(text=login_page(), content_type="text/html")


@routes.post("/ui/login")
@auth("public")
async def login(request: web.Request) -> web.Response:
    """A form with the token: the session cookie and the stacks page, or the form again saying why."""
    form = parse_qs((await read_body(request, LOGIN_CAP)).decode("utf-8", errors="replace"))
    token = (form.get("token") or [""])[0].strip()
    rt = request.app[RUNTIME]
    principal = await resolve(rt, token) if token.isascii() else None
    if principal is None:
        error = "That token was not accepted: paste the admin token or one `anneal token create` made."
        return web.Response(text=login_page(error), content_type="text/html", status=401)
    # A token only the validator (Keystone) knows rides along encrypted, to be validated again.
    external = (
        None if principal == ADMIN or principal.token_id else session.seal_external(rt.keys.data_key, token)
    )
    response = web.HTTPSeeOther("/ui/")
    response.set_cookie(
        session.COOKIE,
        session.mint(rt.keys.admin_token, principal, time.time(), external),
        path="/ui",
        max_age=session.LIFETIME,
        httponly=True,
        samesite="Strict",
        secure=_over_https(request),
    )
    raise response


@routes.post("/ui/logout")
@auth("public")
async def logout(request: web.Request) -> web.Response:
    """Forget the session cookie in this browser (a copy taken elsewhere lasts until it expires)."""
    response = web.HTTPSeeOther("/ui/login")
    response.del_cookie(
        session.COOKIE, path="/ui", httponly=True, samesite="Strict", secure=_over_https(request)
    )
    raise response


def _over_https(request: web.Request) -> bool:
    """Served over https: directly, or behind the TLS front that --public-url names."""
    return request.secure or request.app[RUNTIME].settings.base_url.startswith("https://")


async def shell(request: web.Request) -> web.Response:
    """The one page every view uses; ui.js reads the path and draws it."""
    return web.Response(text=_static_text("shell.html"), content_type="text/html")


for _path in (
    "/ui/",
    "/ui/stacks/{name}",
    "/ui/deployments/{id}",
    "/ui/servers",
    "/ui/events",
    "/ui/failures",
):
    routes.get(_path)(auth("ui-page")(shell))


@routes.get("/ui/static/{file}")
@auth("public")
async def static(request: web.Request) -> web.StreamResponse:
    """The scripts, styles and licence files in control/api/ui/static (no data: public)."""
    name = request.match_info["file"]
    suffix = name[name.rfind(".") :] if "." in name else ""
    path = resources.files(__package__).joinpath("static", name)
    if not STATIC_NAME.fullmatch(name) or suffix not in TYPES or not path.is_file():
        raise web.HTTPNotFound()
    return web.Response(
        body=path.read_bytes(), content_type=TYPES[suffix], headers={"Cache-Control": "max-age=3600"}
    )
