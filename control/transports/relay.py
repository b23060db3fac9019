"""RELAY: the control plane assigns a server to a relay (`anneal-agent relay`) by its URL.

Nothing is written anywhere: the relay forwards the agent's requests to the control
plane's own HTTP endpoints (document long-poll, signals, heartbeats) and keeps what it
must store itself. The document's ``transport`` section names the relay,
``{"kind": "RELAY", "url": "http://relay:port"}``; an agent that accepts it sends every
control-plane request there from then on (and straight to the control plane again
once a document names ``HTTP``). Moving a live server between HTTP, RELAY and the
stores follows docs/transports.md, "Switching a live server".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from control.transports.store import Waiting


class RelayStore:
    kind = "RELAY"

    def __init__(self, url: str, poll_interval: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.poll_interval = poll_interval

    def ready(self) -> bool:
        return True

    async def start(self, on_ready: Callable[[], Awaitable[None]]) -> None:
        return None

    async def close(self) -> None:
        return None

    def section(self, server_id: str, waiting: list[Waiting], expires: int) -> dict[str, Any]:
        # No per-deployment targets: signals go to the document's signal URLs, through the relay.
        return {"kind": self.kind, "url": self.url}

    async def put_document(self, server_id: str, body: bytes) -> None:
        return None  # the relay fetches it from the control plane's HTTP endpoint

    async def delete_document(self, server_id: str) -> None:
        return None

    async def list_signals(self, limit: int) -> list[str]:
        return []  # signals arrive over HTTP, forwarded by the relay

    async def get_signal(self, name: str) -> bytes | None:
        return None

    async def delete_signal(self, name: str) -> None:
        return None
