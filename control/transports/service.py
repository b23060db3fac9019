"""Wiring of the transports into one control-plane process: build, start, import, refresh."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import or_, select

from agent import wire, wire_caps
from control.errors import BadRequestError, ControlError, NotFoundError
from control.runtime import Runtime
from control.services import agents
from control.settings import Settings
from control.store.orm import DeploymentRow, ServerRow
from control.transports import offline
from control.transports.local import LocalStore
from control.transports.publisher import Transports, arrived_via
from control.transports.relay import RelayStore
from control.transports.store import Lifetimes, Store
from control.transports.swift import SwiftConfig, SwiftStore
from control.txn import Txn

log = logging.getLogger(__name__)


def build(settings: Settings, secret: bytes) -> Transports:
    """The publisher for *settings*: HTTP always, plus each store that is configured."""
    stores: list[Store] = []
    lifetimes = Lifetimes(settings.store_url_lifetime, settings.store_clock_margin)
    if 0 < settings.swift_key_rotation < lifetimes.total:
        raise ValueError(
            f"--swift-key-rotation {settings.swift_key_rotation:g} s is shorter than a URL's lifetime "
            f"({lifetimes.total:g} s: --store-url-lifetime + --store-clock-margin): agents would lose access"
        )
    if settings.swift_auth_url:
        stores.append(
            SwiftStore(
                SwiftConfig(
                    auth_url=settings.swift_auth_url,
                    user=settings.swift_user,
                    key=settings.swift_key,
                    container_prefix=settings.store_prefix,
                    public_url=settings.swift_public_url,
                    poll_interval=settings.store_poll_interval,
                    key_rotation=settings.swift_key_rotation,
                ),
                secret,
            )
        )
    if settings.s3_endpoint:
        # boto3 is 9.5 MiB of a control plane's memory: loaded only when S3 is configured.
        from control.transports.s3 import S3Config, S3Store  # noqa: PLC0415

        stores.append(
            S3Store(
                S3Config(
                    endpoint=settings.s3_endpoint,
                    access_key=settings.s3_access_key,
                    secret_key=settings.s3_secret_key,
                    region=settings.s3_region,
                    bucket=f"{settings.store_prefix}-transport",
                    public_url=settings.s3_public_url,
                    poll_interval=settings.store_poll_interval,
                )
            )
        )
    if settings.local_dir:
        stores.append(LocalStore(settings.local_dir, settings.store_poll_interval))
    if settings.relay_url:
        stores.append(RelayStore(settings.relay_url, settings.store_poll_interval))
    return Transports(stores, lifetimes, settings.document_cache)


async def start(rt: Runtime, kick: Callable[[str], None]) -> None:
    publisher = rt.publisher
    if not isinstance(publisher, Transports) or not publisher.stores:
        return

    async def refresh(server_ids: list[str]) -> None:
        async with rt.sessions() as session:
            txn = Txn(session, rt)
            txn.publish.update(server_ids)
            await txn.commit()

    async def on_ready() -> None:
        """A store became reachable: servers on it get a document naming its URLs (new serial)."""
        async with rt.sessions() as session:
            ids = list(
                await session.scalars(
                    select(ServerRow.id).where(
                        or_(ServerRow.transport != "HTTP", ServerRow.transport_previous != "")
                    )
                )
            )
        if ids:
            await refresh(ids)

    async def intake(kind: str, deployment_id: str, generation: int, body: bytes) -> None:
        try:
            result = await import_signal(rt, kick, deployment_id, generation, body, via=kind)
        except ControlError as e:
            log.error("%s: signal %s/%s refused: %s", kind, deployment_id, generation, e)
            return
        log.info(
            "%s: signal for deployment %s generation %s: %s%s",
            kind,
            deployment_id,
            generation,
            result["status"],
            " (duplicate)" if result.get("duplicate") else "",
        )

    await publisher.start(on_ready, refresh, intake, rt.settings.store_signal_poll)


async def import_signal(
    rt: Runtime,
    kick: Callable[[str], None],
    deployment_id: str,
    generation: int,
    body: bytes,
    *,
    via: str,
) -> dict[str, Any]:
    """Record a signal that arrived through a store or carried media.

    The store's URL was scoped to this one deployment generation, so it counts as the
    deployment's own server signalling; a file carried on media must be signed by that
    server's key (control/transports/offline.py).
    Duplicates are answered idempotently, stale generations refused.
    """
    try:
        obj = wire.loads_capped(body, wire_caps.MAX_SIGNAL_BYTES, f"signal {deployment_id}/{generation}")
    except wire.WireError as e:
        raise BadRequestError(str(e), where="signal") from e
    async with rt.sessions() as session:
        server_id = await session.scalar(
            select(DeploymentRow.server_id).where(DeploymentRow.id == deployment_id)
        )
    if server_id is None:
        raise NotFoundError(f"deployment {deployment_id!r} not found", where="deployment")
    if via == "LOCAL":  # carried on media: only as signed by the server's own key
        inner = await offline.open_signal_file(rt, server_id, deployment_id, generation, body)
        obj = wire.loads_capped(inner, wire_caps.MAX_SIGNAL_BYTES, f"signal {deployment_id}/{generation}")
    result = await agents.record_signal(
        rt, kick, deployment_id, generation, obj, sig=None, server_id=server_id
    )
    await arrived_via(rt, server_id, via)
    return result
