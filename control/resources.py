"""What each resource type does on create, update and delete.

A handler acts inside the engine's transaction and returns an Outcome:
COMPLETE (with attributes), IN_PROGRESS (a deployment waiting for its
signal), FAILED (with the reason), or REPLACE from update (the engine then
creates the replacement first and deletes the old resource last).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from sqlalchemy import delete, select

from control import deploy, transports
from control.errors import ControlError
from control.keys import new_token, token_hash
from control.store.orm import ConfigRow, DeploymentRow, ResourceRow, ServerRow, StackRow
from control.txn import Txn


@dataclass(frozen=True)
class Outcome:
    status: str
    physical_id: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    reason: str = ""


REPLACE: Final = Outcome("REPLACE")


def done(physical_id: str | None = None, **attributes: Any) -> Outcome:
    return Outcome("COMPLETE", physical_id, attributes)


@dataclass(frozen=True)
class Res:
    """The resource being acted on."""

    stack: StackRow
    name: str
    type: str

    @property
    def stack_path(self) -> str:
        return f"{self.stack.name}/{self.stack.id}"

    @property
    def where(self) -> str:
        return f"resources.{self.name}"


class Handler(Protocol):
    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome: ...
    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome: ...
    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome: ...


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


class SoftwareConfig:
    """An immutable config: any change makes a new one (Heat: every property replaces)."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        config_id = str(uuid.uuid4())
        body = {k: props.get(k) for k in ("config", "inputs", "outputs", "options")}
        txn.session.add(
            ConfigRow(
                id=config_id,
                stack_id=res.stack.id,
                name=f"{res.stack.name}-{res.name}",
                group=str(props.get("group") or "Heat::Ungrouped"),
                body=body,
                created_at=time.time(),
            )
        )
        return done(config_id, config=props.get("config"))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        return REPLACE

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        if row.physical_id:
            await txn.session.execute(delete(ConfigRow).where(ConfigRow.id == row.physical_id))
        return done()


class Server:
    """OS::Heat::DeployedServer and adopted OS::Nova::Server: a named server and its agent."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        name = str(props.get("name") or f"{res.stack.name}-{res.name}")
        server = await txn.session.scalar(select(ServerRow).where(ServerRow.name == name))
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
        server = await txn.session.get(ServerRow, row.physical_id or "")
        if server is None:
            return REPLACE
        _config_transport(txn, res, server, props)
        return done(server.id, **_server_attributes(server))

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        server = await txn.session.get(ServerRow, row.physical_id or "")
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
    )
    txn.session.add(server)
    await txn.session.flush()
    txn.publish.add(server.id)
    if settings.provisioner != "enrol" and owner_stack_id is not None:  # operators enrol their own
        provisioner = txn.runtime.provisioner

        async def provision() -> None:
            await provisioner.provision(server.id, name, token)

        txn.later.append(provision)
    return server, token


async def remove_server(txn: Txn, server: ServerRow) -> None:
    """Forget a server: its credential stops working and its agent is released."""
    if server.credential_hash:
        txn.runtime.credentials.pop(server.credential_hash, None)
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
        transports.assign(txn, server, value, f"{res.where}.properties.software_config_transport")


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


class SoftwareDeployment:
    """OS::Heat::SoftwareDeployment: runs its config on its server for the actions it lists."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        server = await deploy.server_for(txn, props.get("server"), f"{res.where}.properties.server")
        transport = self._transport(txn, res, props)
        source = await self._source(txn, res, props)
        now = time.time()
        dep = DeploymentRow(
            id=str(uuid.uuid4()),
            stack_id=res.stack.id,
            resource_name=res.name,
            server_id=server.id,
            config_id=props.get("config") or None,
            actions=list(props.get("actions") or ["CREATE", "UPDATE"]),
            signal_transport=transport,
            status="COMPLETE",
            status_reason="CREATE is not among the deployment's actions",
            timeout=float(props.get("timeout") or txn.runtime.settings.deployment_timeout),
            input_values=dict(props.get("input_values") or {}),
            generation=0,
            created_at=now,
            updated_at=now,
        )
        dep.name = source.name
        txn.session.add(dep)
        if "CREATE" not in dep.actions:
            return done(dep.id, **deploy.attributes(dep))
        deploy.start_generation(txn, dep, source, "CREATE", res.stack_path)
        return self._outcome(dep)

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        dep = await txn.session.get(DeploymentRow, row.physical_id or "")
        old = row.properties or {}
        if dep is None or props.get("server") != old.get("server"):
            return REPLACE
        if self._transport(txn, res, props) != dep.signal_transport:
            return REPLACE
        source = await self._source(txn, res, props)
        values = dict(props.get("input_values") or {})
        if source.name != dep.name or deploy.replace_on_change_differs(dep, source, values):
            return REPLACE
        dep.config_id = props.get("config") or None
        dep.actions = list(props.get("actions") or ["CREATE", "UPDATE"])
        dep.input_values = values
        dep.timeout = float(props.get("timeout") or txn.runtime.settings.deployment_timeout)
        if "UPDATE" not in dep.actions:
            return done(dep.id, **deploy.attributes(dep))  # the server keeps what it has
        deploy.start_generation(txn, dep, source, "UPDATE", res.stack_path)
        return self._outcome(dep)

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        dep = await txn.session.get(DeploymentRow, row.physical_id or "")
        if dep is None:
            return done()
        server = await txn.session.get(ServerRow, dep.server_id)
        runs_delete = "DELETE" in dep.actions and dep.item is not None
        if runs_delete and server is not None and server.status == "ENROLLED":
            source = await self._source(txn, res, row.properties or {}, dep.name)
            deploy.start_generation(txn, dep, source, "DELETE", res.stack_path)
            if dep.status == "IN_PROGRESS":
                return Outcome("IN_PROGRESS", dep.id)
        await forget_deployment(txn, dep)
        return done()

    def _transport(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> str:
        transport = str(props.get("signal_transport") or txn.runtime.settings.default_signal_transport)
        if transport not in deploy.SUPPORTED_SIGNAL_TRANSPORTS:
            raise ControlError(
                f"signal_transport {transport} is not supported; use one of "
                f"{', '.join(deploy.SUPPORTED_SIGNAL_TRANSPORTS)}",
                where=f"{res.where}.properties.signal_transport",
            )
        return transport

    async def _source(
        self, txn: Txn, res: Res, props: Mapping[str, Any], name: str | None = None
    ) -> deploy.Source:
        config_id = props.get("config") or None
        body: Mapping[str, Any] = {}
        group, config_name = "Heat::Ungrouped", ""
        if config_id:
            row = await txn.session.get(ConfigRow, str(config_id))
            if row is None:
                raise ControlError(
                    f"software config {config_id!r} not found", where=f"{res.where}.properties.config"
                )
            body, group, config_name = row.body, row.group, row.name
        return deploy.Source(
            group=group,
            config=body.get("config") if body.get("config") is not None else "",
            inputs=tuple(body.get("inputs") or ()),
            outputs=tuple(body.get("outputs") or ()),
            options=body.get("options"),
            name=name or str(props.get("name") or config_name or f"{res.stack.name}-{res.name}"),
        )

    @staticmethod
    def _outcome(dep: DeploymentRow) -> Outcome:
        if dep.status == "IN_PROGRESS":
            return Outcome("IN_PROGRESS", dep.id)
        return done(dep.id, **deploy.attributes(dep))


async def forget_deployment(txn: Txn, dep: DeploymentRow) -> None:
    """Remove a deployment and take its derived config off the server."""
    server = await txn.session.get(ServerRow, dep.server_id)
    if server is not None and dep.item is not None:
        txn.publish.add(server.id)
    await txn.session.delete(dep)


HANDLERS: Mapping[str, Handler] = {
    "OS::Heat::None": Nothing(),
    "OS::Heat::Value": Value(),
    "OS::Heat::SoftwareConfig": SoftwareConfig(),
    "OS::Heat::SoftwareDeployment": SoftwareDeployment(),
    "OS::Heat::DeployedServer": Server(),
    "OS::Nova::Server": Server(),
}
