"""Servers and the simple types: DeployedServer, adopted Nova servers, None, Value."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from control.keys import new_token, token_hash
from control.resources import deploy
from control.resources.base import REPLACE, Outcome, Res, done
from control.store.orm import DeploymentRow, ResourceRow, ServerRow
from control.transports.publisher import assign
from control.txn import Txn


class Nothing:
    """OS::Heat::None: accepts anything, does nothing."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        return done(str(uuid.uuid4()))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        return done(row.physical_id)

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return done()


class Value(Nothing):
    """OS::Heat::Value: its `value` attribute is its `value` property."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        return done(str(uuid.uuid4()), value=props.get("value"))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        return done(row.physical_id, value=props.get("value"))


class Server:
    """OS::Heat::DeployedServer and adopted OS::Nova::Server: a named server and its agent."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        name = str(props.get("name") or f"{res.stack.name}-{res.name}")
        server = await deploy.server_named(txn, name)
        if server is None:
            server, _ = await create_server(txn, name, owner_stack_id=res.stack.id)
            if txn.runtime.settings.provisioner == "enrol":
                txn.event(
                    res.stack.id,
                    res.name,
                    "CREATE",
                    "IN_PROGRESS",
                    f"server {name} awaits its agent: `anneal server token {name}` gives it a token",
                    traversal=res.stack.traversal,
                )
        _config_transport(txn, res, server, props)
        return done(server.id, **_server_attributes(server))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        old_name = (row.properties or {}).get("name") or f"{res.stack.name}-{res.name}"
        if str(props.get("name") or f"{res.stack.name}-{res.name}") != old_name:
            return REPLACE
        server = await txn.get(ServerRow, row.physical_id or "")
        if server is None:
            return REPLACE
        _config_transport(txn, res, server, props)
        return done(server.id, **_server_attributes(server))

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        server = await txn.get(ServerRow, row.physical_id or "")
        if server is None or server.owner_stack_id != res.stack.id:
            return done()  # a server the stack did not create outlives it
        remaining = await txn.session.scalar(
            select(DeploymentRow.id).where(DeploymentRow.server_id == server.id).limit(1)
        )
        if remaining is not None:
            return done()  # another stack still deploys to it
        await remove_server(txn, server)
        return done()


async def create_server(txn: Txn, name: str, *, owner_stack_id: str | None) -> tuple[ServerRow, str]:
    """A server awaiting enrolment and its one-time token; the provisioner gets it after commit."""
    settings = txn.runtime.settings
    token = new_token()
    now = time.time()
    server = ServerRow(
        id=str(uuid.uuid4()),
        name=name,
        status="AWAITING_ENROLMENT",
        owner_stack_id=owner_stack_id,
        provisioner=settings.provisioner,
        enrol_token_hash=token_hash(token),
        enrol_expires=now + settings.enrol_token_ttl,
        serial=1,
        created_at=now,
        # Column defaults apply only at the flush, and the row is used before it (no flush per server).
        serial_at=0.0,
        transport="HTTP",
        transport_previous="",
        agent_kind="anneal",
        public_keys={},
        agent_status={},
        rebuilds=[],
    )
    txn.add(server, ("name", name))
    txn.publish.add(server.id)
    if settings.provisioner != "enrol" and owner_stack_id is not None:  # operators enrol their own
        provisioner = txn.runtime.provisioner

        async def provision() -> None:
            await provisioner.provision(server.id, name, token)

        txn.later.append(provision)
    return server, token


async def remove_server(txn: Txn, server: ServerRow) -> None:
    """Forget a server: its credential stops working and its agent is released."""
    if server.credential_hash:  # every process stops accepting it within credentials.BOUND
        await txn.runtime.credentials.revoke(txn.session, server.credential_hash)
    await txn.session.delete(server)
    txn.publish.add(server.id)
    provisioner, sid, name = txn.runtime.provisioner, server.id, server.name

    async def release() -> None:
        await provisioner.release(sid, name)

    txn.later.append(release)


def _config_transport(txn: Txn, res: Res, server: ServerRow, props: Mapping[str, Any]) -> None:
    """software_config_transport chooses the server's transport; a change moves its agent."""
    value = props.get("software_config_transport")
    if value is not None:
        assign(txn, server, value, f"{res.where}.properties.software_config_transport")


def _server_attributes(server: ServerRow) -> dict[str, Any]:
    return {
        "name": server.name,
        "os_collect_config": {},
        "networks": {},
        "addresses": {},
        "accessIPv4": "",
        "accessIPv6": "",
        "first_address": "",
        "instance_name": server.name,
        "show": {"id": server.id, "name": server.name, "status": server.status},
    }
