"""The control-plane application: factory and the resources it owns."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from aiohttp import web
from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError

from agent import serving
from control import keys
from control.api import access, body, metrics, middleware
from control.api.app_keys import DEFS, ENGINE, RUNTIME, UNAUTHENTICATED
from control.api.heat_v1 import app as heat_v1
from control.api.routes import ROUTES
from control.api.ui import site as ui_site
from control.documents import reconcile
from control.engine.stackdef import Definitions
from control.engine.worker import Engine
from control.provision import EnrolProvisioner, LocalProvisioner, Provisioner
from control.runtime import Runtime
from control.services import alive, audit, autoconverge, keystone
from control.settings import Settings
from control.store.db import Sessions, open_database
from control.store.orm import ServerRow
from control.transports import service as transports
from control.transports.publisher import http_publisher

log = logging.getLogger(__name__)
#: Seconds between table polls where NOTIFY carries other processes' changes: it only
#: catches what a listener missed while it reconnected, or a process killed between
#: its commit and its notification.
REPUBLISH_FALLBACK = 10.0


def api_app(settings: Settings) -> web.Application:
    """The HTTP API alone: routes, error and auth middleware, the body cap.

    Its RUNTIME, ENGINE and DEFS keys are set by whoever owns them: make_app's
    lifetime, or bench/scale.py, which runs the engine itself.
    """
    app = web.Application(
        middlewares=[
            middleware.measure,
            access.audited("operator"),
            middleware.errors,
            middleware.authenticate,
        ],
        client_max_size=settings.request_cap,
    )
    app[UNAUTHENTICATED] = body.unauthenticated_gate()
    app.add_routes(ROUTES)
    ui_site.install(app)  # the web view: its own routes, not the REST API's (not in /openapi.json)
    return app


def make_app(settings: Settings) -> web.Application:
    """Build the control plane; the database opens when the app starts."""
    app = api_app(settings)

    async def lifetime(app: web.Application) -> AsyncIterator[None]:
        loaded = keys.load_or_create(settings.data_dir)  # creates the data dir (0700) first
        engine_db, sessions = await open_database(settings.db_url, loaded.data_key)
        await check_fleet(sessions, settings)
        provisioner = make_provisioner(settings)
        publisher = transports.build(settings, loaded.signal_key)
        runtime = Runtime(settings, loaded, sessions, publisher, provisioner)
        definitions = Definitions(settings.max_nested_depth)
        engine = Engine(runtime, definitions)
        app[RUNTIME], app[ENGINE], app[DEFS] = runtime, engine, definitions
        await runtime.publish_all()
        await transports.start(runtime, engine.kick)
        await restart_local_agents(runtime)
        await engine.resume()
        refresher = asyncio.create_task(refresh_documents(runtime))
        polls = asyncio.create_task(alive.keep_writing(runtime), name="polls-alive")
        rounds = asyncio.create_task(autoconverge.loop(runtime, engine.kick), name="converge_interval")
        tasks = [refresher, polls, rounds, *follow_others(runtime, engine_db.dialect.name)]
        yield
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with contextlib.suppress(DBAPIError, OSError):
            await alive.write(runtime)  # the last polls' marks
        began = time.monotonic()
        await engine.close()
        await runtime.credentials.close()
        if runtime.signal_batch is not None:  # made on the first signal
            await runtime.signal_batch.close()
        await publisher.close()
        await provisioner.close()
        await engine_db.dispose()
        log.info(
            "stopped: engine, publishers, local agents and database closed in %.2f s",
            time.monotonic() - began,
        )

    app.on_shutdown.append(_stopping)
    app.cleanup_ctx.append(lifetime)
    if settings.keystone_url:  # after lifetime (it plugs into the Runtime), before any listener
        app.cleanup_ctx.append(lambda main: keystone.plugged(main[RUNTIME]))
    if settings.heat_listen:  # after lifetime: it reads what lifetime made, and closes first
        app.cleanup_ctx.append(lambda main: heat_v1.serve_heat(main, settings))
    if settings.metrics_listen:
        app.cleanup_ctx.append(lambda main: metrics.serve_metrics(main, settings))
    return app


async def _stopping(app: web.Application) -> None:
    """On SIGTERM, before waiting for requests: answer held long-polls, SIGTERM local agents."""
    if RUNTIME not in app:
        return
    runtime = app[RUNTIME]
    runtime.stopping = True
    publisher = http_publisher(runtime.publisher)
    polls = publisher.release_waiters() if publisher is not None else 0
    agents = runtime.provisioner.stopping()
    log.info("stopping: %d held long-poll(s) answered, %d local agent(s) told to stop", polls, agents)


def follow_others(runtime: Runtime, dialect: str) -> list[asyncio.Task[None]]:
    """Keep this process's documents up with other processes' commits: NOTIFY, and the table poll."""
    settings = runtime.settings
    listening = dialect == "postgresql"
    runtime.announce = listening
    interval = settings.republish_poll or (REPUBLISH_FALLBACK if listening else settings.work_poll * 2)
    tasks = [asyncio.create_task(reconcile.loop(runtime, interval), name="republish")]
    if listening:
        tasks.append(asyncio.create_task(reconcile.follow(runtime), name="follow"))
    return tasks


async def check_fleet(sessions: Sessions, settings: Settings) -> None:
    """Warn when the descriptor limit is below what the servers in the database need."""
    async with sessions() as session:
        fleet = await session.scalar(select(func.count()).select_from(ServerRow)) or 0
    if fleet > settings.max_agents:
        serving.check_fd_limit(fleet, f"the fleet in the database ({fleet} servers)")


async def refresh_documents(runtime: Runtime) -> None:
    """Re-sign documents well before they expire (each after half its lifetime); prune the audit log past
    its retention on the same beat (at most every 10 minutes, a bounded batch each time)."""
    period = min(max(runtime.settings.document_ttl / 8, 0.5), 600.0)
    while True:
        await asyncio.sleep(period)
        try:
            await runtime.refresh_due()
            pruned = await audit.prune(runtime)
            if pruned:
                log.info(
                    "pruned %d audit row(s) older than %g days", pruned, runtime.settings.audit_retention_days
                )
        except Exception:  # a database hiccup must not stop the refresher for good
            log.exception("re-signing documents or pruning the audit log failed; retrying in %g s", period)


def make_provisioner(settings: Settings) -> Provisioner:
    if settings.provisioner == "local":
        return LocalProvisioner(settings.data_dir, settings.base_url, settings.local_agent_args)
    if settings.provisioner == "enrol":
        return EnrolProvisioner()
    raise ValueError(f"unknown provisioner {settings.provisioner!r}; use enrol or local")


async def restart_local_agents(runtime: Runtime) -> None:
    """After a restart, local agents come back; those without an enrolment get a fresh token.

    Without one means the database says not enrolled, or the agent's state dir holds no
    enrolment: a crash between the enrolment's commit and its answer leaves the server
    ENROLLED with an agent that never got its credential, which only a new token mends.
    """
    provisioner = runtime.provisioner
    if runtime.settings.provisioner != "local" or not isinstance(provisioner, LocalProvisioner):
        return
    async with runtime.sessions() as session:
        rows = list(await session.scalars(select(ServerRow).where(ServerRow.provisioner == "local")))
        tokens: dict[str, str | None] = {}
        for server in rows:
            tokens[server.id] = None
            if server.status != "ENROLLED" or not provisioner.enrolled(server.id):
                token = keys.new_token()
                server.enrol_token_hash = keys.token_hash(token)
                server.enrol_expires = time.time() + runtime.settings.enrol_token_ttl
                tokens[server.id] = token
        await session.commit()
    for server in rows:
        await provisioner.provision(server.id, server.name, tokens[server.id])
