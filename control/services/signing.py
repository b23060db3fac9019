"""The control plane's signing key as operators see it: show it, rotate it."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select, update

from agent import envelope
from control import keys
from control.runtime import Runtime
from control.store.orm import ServerRow


def key_view(rt: Runtime) -> dict[str, Any]:
    rt.follow_key_rotation()
    public = envelope.public_raw(rt.keys.signing_key.public_key())
    return {
        "key_id": rt.keys.key_id,
        "public_key": envelope.b64(public),
        "chain": [link.to_json() | {"key_id": link.key_id} for link in rt.keys.chain],
        "document_ttl": rt.settings.document_ttl,
        # What `stack abandon --to-key` on another control plane takes to hand stacks over here.
        "adopt_key": rt.keys.adopt_public_b64,
        "url": rt.settings.base_url,
    }


async def rotate(rt: Runtime) -> dict[str, Any]:
    """A new signing key chained from the old one; every document is re-signed with it at once."""
    rt.follow_key_rotation()  # chain from the newest key, even if another process made it
    previous = rt.keys.key_id
    rt.keys = keys.rotate(rt.settings.data_dir, rt.keys, time.time())
    async with rt.sessions() as session:
        await session.execute(
            update(ServerRow)
            .values(serial=ServerRow.serial + 1, serial_at=time.time())
            .execution_options(synchronize_session=False)
        )
        await session.commit()
        ids = list(await session.scalars(select(ServerRow.id)))
    await rt.publish(ids)
    return {**key_view(rt), "previous_key_id": previous, "documents_resigned": len(ids)}
