"""The per-server document: every deployment on a server, rendered from its rows, secrets sealed."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy.orm import load_only

from agent import wire
from control.documents import seal
from control.store.orm import DeploymentRow, ServerRow

#: The columns of a deployment row that a document (and a transport's section of it) reads: a
#: publish loads these only, not the inputs, outputs and hook output each row would decrypt for
#: nothing (six values per deployment); reading another raises instead of querying.
RENDERED = load_only(
    DeploymentRow.id,
    DeploymentRow.server_id,
    DeploymentRow.item,
    DeploymentRow.item_id,
    DeploymentRow.status,
    DeploymentRow.status_code,
    DeploymentRow.generation,
    DeploymentRow.hash,
    DeploymentRow.action,
    DeploymentRow.timeout,
    DeploymentRow.retry,
    DeploymentRow.check_serial,
    raiseload=True,
)


def render_document(server: ServerRow, rows: Iterable[DeploymentRow], ttl: float) -> wire.Document:
    """The server's document: every deployment on it, Heat's shape plus our extras, secrets sealed."""
    items = []
    meta = {}
    recipient = seal.box_key(server.public_keys or {})
    for row in rows:
        item, config_secret = seal.load_item(row.item, f"deployment {row.id}")
        item, fields = seal.seal_item(item, server.id, recipient, config_secret)
        items.append(item)
        # A generation failed without a signal (cancelled, timed out): its agent stops the hook.
        stop = row.status == "FAILED" and row.status_code is None
        meta[item.id] = wire.ItemMeta(
            row.id,
            row.generation,
            row.hash,
            row.action,
            row.timeout,
            fields,
            stop=stop,
            retry=row.retry,
            check=row.check_serial or 0,
        )
    return wire.Document(
        server_id=server.id,
        serial=server.serial,
        issued_at=iso(server.serial_at),
        deployments=tuple(wire.sorted_items(items)),
        meta=meta,
        expires_at=iso(server.serial_at + ttl),
        handover=server.handover or None,
    )


def iso(ts: float) -> str:
    """*ts* (seconds since the epoch) as the UTC timestamp documents and Heat's metadata carry."""
    second = math.floor(ts)
    if ts - second > 0.99999:  # datetime rounds to microseconds, which may carry into the next second
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _iso_second(second)


@functools.lru_cache(maxsize=64)
def _iso_second(second: int) -> str:
    """One second's timestamp, formatted once: a big step stamps thousands of rows in the same second."""
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
