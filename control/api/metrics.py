"""``/metrics`` in Prometheus's text format: on the main port behind the metrics (or admin)
token, and on ``--metrics-listen`` without a token (a loopback port, unless allowed otherwise)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from control.api import middleware
from control.api.app_keys import RUNTIME
from control.api.middleware import auth
from control.metrics import CONTENT_TYPE
from control.services import fleet_metrics
from control.settings import Settings

routes = web.RouteTableDef()


@routes.get("/metrics")
@auth("metrics")  # the metrics token (<data dir>/metrics-token) or the admin token
async def metrics(request: web.Request) -> web.Response:
    """Every metric of this process; the fleet-wide gauges are read from the database now."""
    rt = request.app[RUNTIME]
    await fleet_metrics.refresh(rt)
    return web.Response(body=rt.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})


async def serve_metrics(main: web.Application, settings: Settings) -> AsyncIterator[None]:
    """Listen on ``--metrics-listen`` for the main app's lifetime: /metrics alone, no token asked."""
    app = web.Application(middlewares=[middleware.errors])
    app[RUNTIME] = main[RUNTIME]
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = settings.metrics_host_port()
    await web.TCPSite(runner, host, port).start()
    yield
    await runner.cleanup()
