"""Typed keys for what the aiohttp application owns.

A leaf, not part of app.py: the route modules read these keys, and app.py imports
the route modules, so keys kept in app.py would make an import cycle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from control.engine.stackdef import Definitions
from control.engine.worker import Engine
from control.principal import Principal
from control.runtime import Runtime

RUNTIME = web.AppKey("runtime", Runtime)
#: The caller's Principal (read, write and admin routes, Heat's project routes; the web view's session).
PRINCIPAL = web.RequestKey("principal", Principal)
#: Called with the status before an error answer lingers (middleware.close_after): the audit row is
#: written then, not a linger later, so the caller's next request already finds it.
BEFORE_LINGER: web.RequestKey[Callable[[int], Awaitable[None]]] = web.RequestKey("before_linger")
ENGINE = web.AppKey("engine", Engine)
DEFS = web.AppKey("definitions", Definitions)
#: The gate unauthenticated request bodies pass, a few at a time (control/api/body.py).
UNAUTHENTICATED = web.AppKey("unauthenticated_bodies", asyncio.Semaphore)
