"""The Heat API's own aiohttp application and the site it listens on, beside the main one in one process."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from control.api import access
from control.api import middleware as measured
from control.api.app_keys import DEFS, ENGINE, RUNTIME
from control.api.heat_v1 import actions, catalogue, middleware, resources, software, stacks, versions
from control.settings import Settings

ROUTES: list[web.AbstractRouteDef] = [
    *versions.routes,
    *stacks.routes,
    *resources.routes,
    *actions.routes,
    *software.routes,
    *catalogue.routes,
]


def heat_app(settings: Settings) -> web.Application:
    """Heat's routes with Heat's error body and token check, counted in the request metrics as the
    main app's are (by route template: Heat's carry ``{tenant_id}``); RUNTIME, ENGINE and DEFS are the main app's."""
    app = web.Application(
        middlewares=[measured.measure, access.audited("heat"), middleware.errors, middleware.authenticate],
        client_max_size=settings.request_cap,
    )
    app.add_routes(ROUTES)
    return app


async def serve_heat(main: web.Application, settings: Settings) -> AsyncIterator[None]:
    """Listen on ``--heat-listen`` for the main app's lifetime (a cleanup context after its own)."""
    app = heat_app(settings)
    app[RUNTIME], app[ENGINE], app[DEFS] = main[RUNTIME], main[ENGINE], main[DEFS]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = settings.heat_host_port()
    await web.TCPSite(runner, host, port).start()
    yield
    await runner.cleanup()
