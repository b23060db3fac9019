"""The control plane's aiohttp app in the test's own process and event loop, restartable.

For tests that need to reach inside (monkeypatched engine limits, the runtime's sessions)
or to tear the app down mid-flight as a crash would; everything else starts `anneal serve`
(tests/support/controlplane.py).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from sqlalchemy import select

from control.api.app import make_app
from control.api.app_keys import RUNTIME
from control.settings import Settings
from control.store.orm import DeploymentRow, ServerRow
from tests.support.processes import free_port

#: Bound (seconds) on one API request, so a hang fails clearly.
REQUEST_BOUND = 60


class Plane:
    """The control plane app in this process, on a fixed loopback port, restartable."""

    def __init__(self, loop: asyncio.AbstractEventLoop, root: Path) -> None:
        self.loop = loop
        self.port = free_port()
        self.settings = Settings(
            data_dir=root / "data",
            listen=f"127.0.0.1:{self.port}",
            work_lease=1.0,
            work_poll=0.2,
            deployment_timeout=600,
        )
        self.runner: web.AppRunner | None = None
        self.http: aiohttp.ClientSession | None = None
        self.token = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = make_app(self.settings)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True).start()
        self.app = app
        self.token = (self.settings.data_dir / "admin-token").read_text().strip()
        if self.http is None:
            self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_BOUND))

    async def crash(self) -> None:
        assert self.runner is not None
        await asyncio.wait_for(self.runner.cleanup(), 120)  # every engine task cancelled where it stood
        await self.write_lock_free()
        await self.start()

    async def write_lock_free(self) -> None:
        """After the teardown nothing may hold the database's write lock, as after a kill -9."""
        db = self.settings.data_dir / "anneal.db"
        for _ in range(50):  # up to ~10 s for a close still under way
            probe = sqlite3.connect(db, timeout=0)
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.rollback()
                return
            except sqlite3.OperationalError:
                await asyncio.sleep(0.2)
            finally:
                probe.close()
        raise AssertionError("the torn-down control plane still holds the database's write lock")

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        if self.http is not None:
            await self.http.close()

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One API call; a 503 (database busy: "retry later") is retried a few times, as a client would."""
        assert self.http is not None
        headers = {"Authorization": f"Bearer {self.token}"}
        for _ in range(20):
            async with self.http.request(method, self.url + path, json=body, headers=headers) as resp:
                status, answer = resp.status, await resp.json()
            if status != 503:
                break
            await asyncio.sleep(0.5)
        return status, answer

    async def post_signal(self, url: str, body: dict[str, Any]) -> tuple[int, Any]:
        assert self.http is not None
        async with self.http.post(url, json=body) as resp:
            return resp.status, await resp.json()

    async def deployments(self) -> list[DeploymentRow]:
        async with self.app[RUNTIME].sessions() as session:
            return list(await session.scalars(select(DeploymentRow).where(DeploymentRow.item.is_not(None))))

    async def generation(self, dep_id: str) -> int | None:
        async with self.app[RUNTIME].sessions() as session:
            dep = await session.get(DeploymentRow, dep_id)
            return None if dep is None else dep.generation

    async def serials(self) -> dict[str, int]:
        async with self.app[RUNTIME].sessions() as session:
            return dict((await session.execute(select(ServerRow.id, ServerRow.serial))).all())
