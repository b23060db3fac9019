"""Mounting the web view on the control plane's application."""

from __future__ import annotations

import asyncio

from aiohttp import web

from control.api.ui import actions, data, pages


def install(app: web.Application) -> None:
    """Add the /ui routes, their browser headers, and the end of event streams at shutdown."""
    app.add_routes([*pages.routes, *data.routes, *actions.routes])
    app[data.CLOSING] = closing = asyncio.Event()

    async def close_streams(app: web.Application) -> None:
        closing.set()

    app.on_shutdown.append(close_streams)
    app.on_response_prepare.append(pages.secure_headers)
