"""Local media: documents written as files for a config drive or removable media.

``<dir>/<server id>/document.json`` is written atomically (temp file, fsync,
rename) on every change; copy that directory onto the server's media. The
agent's ``file`` source reads it there and writes its signals as
``<deployment id>.<generation>.json`` into an outbox directory, which is
carried back and imported with ``anneal signal import DIR``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from control.transports.store import StoreError, Waiting, signal_name

DOCUMENT_FILE = "document.json"


class LocalStore:
    kind = "LOCAL"

    def __init__(self, directory: str, poll_interval: float = 5.0) -> None:
        self.dir = Path(directory)
        self.poll_interval = poll_interval

    def ready(self) -> bool:
        return True

    async def start(self, on_ready: Callable[[], Awaitable[None]]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)  # documents may carry (encrypted) secrets: the operator's only

    async def close(self) -> None:
        return None

    def section(self, server_id: str, waiting: list[Waiting], expires: int) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "poll_interval": self.poll_interval,
            "signals": {
                w.item_id: {"verb": "FILE", "name": signal_name(w.deployment_id, w.generation)}
                for w in waiting
            },
        }

    async def put_document(self, server_id: str, body: bytes) -> None:
        try:
            await asyncio.to_thread(_write_atomic, self.dir / server_id / DOCUMENT_FILE, body)
        except OSError as e:
            raise StoreError(f"writing {self.dir / server_id / DOCUMENT_FILE}: {e}") from e

    async def delete_document(self, server_id: str) -> None:
        await asyncio.to_thread(shutil.rmtree, self.dir / server_id, True)

    async def list_signals(self, limit: int) -> list[str]:
        return []  # signals come back on media: `anneal signal import DIR`

    async def get_signal(self, name: str) -> bytes | None:
        return None

    async def delete_signal(self, name: str) -> None:
        return None


def _write_atomic(path: Path, body: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
