"""Servers and the simple types: DeployedServer, adopted Nova servers, None, Value."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from control import hot
from control.documents import heat
from control.errors import BadRequestError
from control.hot.ec2 import EC2_ADDRESSES, EC2_INSTANCE
from control.hot.names import name_problem
from control.keys import new_token, token_hash
from control.principal import DEFAULT_PROJECT, Within
from control.resources import deploy
from control.resources.base import REPLACE, Outcome, Res, done, warn
from control.store.orm import DeploymentRow, ResourceRow, ServerRow
from control.transports.publisher import assign, nearest_kind
from control.txn import Txn


class Nothing:
    """OS::Heat::None: accepts anything, does nothing."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        return done(res.external_id or str(uuid.uuid4()))

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


SERVER_TYPES = hot.SERVER_TYPES
#: Attributes only the server's agent can tell: a resource reading one waits for its report.
ADDRESS_ATTRIBUTES = frozenset(
    {"networks", "addresses", "first_address", "accessIPv4", "accessIPv6", *EC2_ADDRESSES}
)
AWAIT = "anneal:awaits-addresses"
#: The console types Heat asks Nova for; no server here has a console (no hypervisor).
CONSOLE_TYPES = ("novnc", "xvpvnc", "spice-html5", "rdp-html5", "serial", "webmks")
NO_CONSOLE = "Cannot get console url: Anneal's servers have no consoles (no hypervisor here)"


class Server:
    """OS::Heat::DeployedServer and adopted OS::Nova::Server: a named server and its agent."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        if res.external_id is not None:
            return await self._adopt(txn, res, res.external_id)
        name = server_name(res.stack.name, res.name, props)
        server = await deploy.server_named(txn, name, Within(res.stack.project))
        if server is None:
            server, _ = await create_server(txn, name, owner_stack_id=res.stack.id, project=res.stack.project)
            if txn.runtime.settings.provisioner == "enrol":
                txn.event(
                    res.stack.id,
                    res.name,
                    "CREATE",
                    "IN_PROGRESS",
                    f"server {name} awaits its agent: `anneal server token {name}` gives it a token",
                    traversal=res.stack.traversal,
                )
        _config_transport(txn, res, server, props, "CREATE")
        return self._ready(txn, res, server, _server_attributes(txn, res, server, props))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        server = await txn.get(ServerRow, row.physical_id or "")
        if server is None or await self.replacement(txn, res, row, props) is not None:
            return REPLACE
        _config_transport(txn, res, server, props, "UPDATE")
        return self._ready(txn, res, server, _server_attributes(txn, res, server, props))

    async def replacement(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> str | None:
        old_name = (row.properties or {}).get("name") or f"{res.stack.name}-{res.name}"
        new_name = server_name(res.stack.name, res.name, props)
        if new_name != old_name:
            return f"name {old_name} -> {new_name}"
        if await txn.get(ServerRow, row.physical_id or "") is None:
            return "its server is gone"
        return None

    async def _adopt(self, txn: Txn, res: Res, external_id: str) -> Outcome:
        """external_id: an existing server of this control plane, by id or name; its properties unused."""
        server = await deploy.visible_server(txn, external_id, Within(res.stack.project))
        if server is None:
            raise BadRequestError(
                f"external_id {external_id!r}: no server of project {res.stack.project} has that id or name "
                "(create or enrol it first: anneal server create)",
                where=f"{res.where}.external_id",
            )
        return self._ready(txn, res, server, _server_attributes(txn, res, server, {}))

    def _ready(self, txn: Txn, res: Res, server: ServerRow, attrs: dict[str, Any]) -> Outcome:
        """Done, unless the template reads an address its agent has not reported yet (Nova: ACTIVE)."""
        wanted = sorted(res.reads & ADDRESS_ATTRIBUTES)
        if not wanted or "addresses" in (server.agent_status or {}):
            return done(server.id, **attrs)
        deadline = time.time() + txn.runtime.settings.deployment_timeout
        attrs[AWAIT] = {"deadline": deadline, "wanted": wanted}
        txn.event(
            res.stack.id,
            res.name,
            "CREATE",
            "IN_PROGRESS",
            f"waiting for the agent of server {server.name} to report its addresses ({', '.join(wanted)} are read)",
            traversal=res.stack.traversal,
        )
        return Outcome("IN_PROGRESS", server.id, attrs, wake_at=deadline)

    async def check(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        """While it waits for addresses: done once the agent reported them, failed at the deadline."""
        awaits = dict(row.attributes.get(AWAIT) or {})
        attrs = {k: v for k, v in row.attributes.items() if k != AWAIT}
        server = await txn.get(ServerRow, row.physical_id or "")
        reported = (server.agent_status or {}).get("addresses") if server is not None else None
        if reported is not None:
            return done(row.physical_id, **{**attrs, **_addresses(row.type, reported)})
        if server is not None and server.agent_kind == heat.HEAT_AGENT:
            warn(
                txn, res, f"Heat's agent chain on server {server.name} reports no addresses; they stay empty"
            )
            return done(row.physical_id, **attrs)
        deadline = float(awaits.get("deadline") or 0)
        if time.time() >= deadline:
            name = server.name if server is not None else row.physical_id
            wanted = ", ".join(awaits.get("wanted") or [])
            reason = (
                f"the agent of server {name} reported no addresses within the deadline ({wanted} are read)"
            )
            return Outcome("FAILED", row.physical_id, row.attributes, reason)
        return Outcome("IN_PROGRESS", row.physical_id, row.attributes, wake_at=deadline)

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        server = await txn.get(ServerRow, row.physical_id or "")
        if server is None or server.owner_stack_id != res.stack.id:
            return done()  # a server the stack did not create outlives it
        remove_unused_later(txn, server)
        return done()


def server_name(stack: str, resource: str, props: Mapping[str, Any]) -> str:
    """The server's name: its `name` property, else <stack>-<resource>; BadRequestError unless a valid name."""
    given = props.get("name")
    name = given if isinstance(given, str) and given else f"{stack}-{resource}"
    problem = name_problem(name, "server")
    if given is not None and not isinstance(given, str):
        problem = f"a server name is a string, not {type(given).__name__}"
    if problem is not None:
        where = f"resources.{resource}.properties" + (".name" if given else "")
        raise BadRequestError(problem, where=where)
    return name


async def create_server(
    txn: Txn,
    name: str,
    *,
    owner_stack_id: str | None,
    server_id: str | None = None,
    project: str = DEFAULT_PROJECT,
) -> tuple[ServerRow, str]:
    """A server awaiting enrolment and its one-time token; the provisioner gets it after commit."""
    settings = txn.runtime.settings
    token = new_token()
    now = time.time()
    server = ServerRow(
        id=server_id or str(uuid.uuid4()),
        project=project,
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
    txn.add(server, deploy.name_key(project, name))
    txn.publish.add(server.id)
    if settings.provisioner != "enrol" and owner_stack_id is not None:  # operators enrol their own
        provisioner = txn.runtime.provisioner

        async def provision() -> None:
            await provisioner.provision(server.id, name, token)

        txn.later.append(provision)
    return server, token


def remove_unused_later(txn: Txn, server: ServerRow) -> None:
    """Remove *server* at the commit unless a deployment still names it then (another stack
    deploys to it): one query for every server the transaction deletes. Asked at once, the
    query flushed what the step had deleted so far: a batch of a group's members flushed
    once per member, not once."""
    if _UNUSED not in txn.ahead:
        txn.ahead[_UNUSED] = {}

        async def remove_all() -> None:
            found: dict[str, ServerRow] = txn.ahead.pop(_UNUSED, {})
            ids = sorted(found)
            used: set[str] = set()
            for start in range(0, len(ids), _CHUNK):
                query = select(DeploymentRow.server_id).where(
                    DeploymentRow.server_id.in_(ids[start : start + _CHUNK])
                )
                used.update(await txn.session.scalars(query.distinct()))
            for server_id in ids:
                if server_id not in used:
                    await remove_server(txn, found[server_id])

        txn.before.append(remove_all)
    txn.ahead[_UNUSED][server.id] = server


_UNUSED = "servers-unused"
#: Servers named per statement (bounds the IN list).
_CHUNK = 1000


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


def _config_transport(txn: Txn, res: Res, server: ServerRow, props: Mapping[str, Any], action: str) -> None:
    """software_config_transport chooses the server's transport; a change moves its agent."""
    value = props.get("software_config_transport")
    if value is None:
        return
    where = f"{res.where}.properties.software_config_transport"
    kind, note = nearest_kind(txn.runtime.publisher, value, where)
    if note:
        warn(txn, res, note, action)
    assign(txn, server, kind, where)


def _server_attributes(txn: Txn, res: Res, server: ServerRow, props: Mapping[str, Any]) -> dict[str, Any]:
    transport = str(props.get("software_config_transport") or heat.DEFAULT_TRANSPORT).upper()
    place = heat.Placement(res.stack.name, res.stack.id, res.name, transport, res.type == "OS::Nova::Server")
    return {
        "name": server.name,
        "os_collect_config": heat.os_collect_config(txn.runtime, server.id, place),
        **_addresses(res.type, (server.agent_status or {}).get("addresses") or []),
        "instance_name": server.name,
        "show": {"id": server.id, "name": server.name, "status": server.status},
        **_nova_only(txn, res, props),
        # AWS::EC2::Instance's zone: as given (no compute service here to place it in one).
        **({"AvailabilityZone": props.get("AvailabilityZone")} if res.type == EC2_INSTANCE else {}),
    }


def _nova_only(txn: Txn, res: Res, props: Mapping[str, Any]) -> dict[str, Any]:
    """console_urls as Heat answers for a server whose consoles Nova cannot give; tags as given."""
    if res.type != "OS::Nova::Server":
        return {}
    if "console_urls" in res.reads:
        warn(txn, res, f"console_urls: {NO_CONSOLE}; each console type reads that message, as in Heat")
    tags = props.get("tags")
    return {
        "console_urls": dict.fromkeys(CONSOLE_TYPES, NO_CONSOLE),
        "tags": tags if isinstance(tags, list) else None,
    }


def address_attributes(found: list[dict[str, Any]]) -> dict[str, Any]:
    """Heat's Nova address attributes from what the agent reported: one "network" per interface."""
    networks: dict[str, list[str]] = {}
    addresses: dict[str, list[dict[str, Any]]] = {}
    for entry in found:
        networks.setdefault(entry["interface"], []).append(entry["addr"])
        addresses.setdefault(entry["interface"], []).append(
            {
                "addr": entry["addr"],
                "version": entry["version"],
                "OS-EXT-IPS-MAC:mac_addr": entry.get("mac", ""),
                "OS-EXT-IPS:type": "fixed",
            }
        )
    v4 = [e["addr"] for e in found if e["version"] == 4]
    v6 = [e["addr"] for e in found if e["version"] == 6]
    return {
        "networks": networks,
        "addresses": addresses,
        "first_address": (v4 or v6 or [""])[0],
        "accessIPv4": (v4 or [""])[0],
        "accessIPv6": (v6 or [""])[0],
    }


def _addresses(rtype: str, found: list[dict[str, Any]]) -> dict[str, Any]:
    """A server resource's address attributes; AWS::EC2::Instance's four are its first address,
    as Heat answers them ("0.0.0.0" while it has none)."""
    out = address_attributes(found)
    if rtype == EC2_INSTANCE:
        out.update(dict.fromkeys(EC2_ADDRESSES, out["first_address"] or "0.0.0.0"))  # noqa: S104 (an answer)
    return out


async def refresh_addresses(txn: Txn, server_id: str, found: list[dict[str, Any]]) -> None:
    """Put a server's newly reported addresses on its server resources; wake a stack waiting for them."""
    rows = await txn.session.scalars(
        select(ResourceRow).where(ResourceRow.physical_id == server_id, ResourceRow.type.in_(SERVER_TYPES))
    )
    for row in rows:
        row.attributes = {**row.attributes, **_addresses(row.type, found)}
        if row.status == "IN_PROGRESS":
            txn.kicks.add(row.stack_id)
