"""The Store port: an object store (or directory) a server's document and signals travel through.

Documents and signals are opaque bytes here: a store never changes what it carries.
Adapters: swift, s3, local, relay.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

#: No store URL lives longer than this (seconds): S3 SigV4's limit, applied to every store.
MAX_URL_LIFETIME = 7 * 24 * 3600


class StoreError(Exception):
    """The store could not be reached or refused a request; the caller retries."""


def signal_name(deployment_id: str, generation: int) -> str:
    """The object (or file) name a deployment generation's signal is written to."""
    return f"{deployment_id}/{generation}"


def parse_signal_name(name: str) -> tuple[str, int] | None:
    dep, sep, gen = name.rpartition("/")
    # ASCII digits that fit the database's 32-bit column: anything else names no signal.
    if not sep or not dep or "/" in dep or not (gen.isascii() and gen.isdigit()) or len(gen) > 10:
        return None
    return (dep, int(gen)) if int(gen) < 2**31 else None


@dataclass(frozen=True)
class Waiting:
    """A deployment generation the server still has to signal."""

    item_id: str
    deployment_id: str
    generation: int


class Store(Protocol):
    kind: str

    def ready(self) -> bool: ...
    async def start(self, on_ready: Callable[[], Awaitable[None]]) -> None: ...
    async def close(self) -> None: ...
    def section(self, server_id: str, waiting: list[Waiting], expires: int) -> dict[str, Any]: ...
    async def put_document(self, server_id: str, body: bytes) -> None: ...
    async def delete_document(self, server_id: str) -> None: ...
    async def list_signals(self, limit: int) -> list[str]: ...
    async def get_signal(self, name: str) -> bytes | None: ...
    async def delete_signal(self, name: str) -> None: ...


@dataclass(frozen=True)
class Lifetimes:
    """URL lifetimes: *need* plus a clock-skew *margin*; refreshed when half of *need* is left."""

    need: float = 86400.0
    margin: float = 900.0

    @property
    def total(self) -> float:
        return min(float(MAX_URL_LIFETIME), self.need + self.margin)

    def due(self, expires: float, now: float) -> bool:
        """Refresh once half of the usable part (lifetime less margin) is gone."""
        margin = min(self.margin, self.total)
        return expires - now < margin + (self.total - margin) / 2
