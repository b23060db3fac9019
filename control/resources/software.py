"""Software configs, components and deployments (Heat's software_config.py and friends)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm.util import identity_key

from control import hot
from control.errors import BadRequestError, ControlError
from control.hot.external import KEPT
from control.principal import Within
from control.resources import deploy
from control.resources.base import REPLACE, Outcome, Res, done, warn
from control.store.orm import ConfigRow, DeploymentRow, ResourceRow, ServerRow
from control.txn import Txn

COMPONENT_GROUP = "component"
DEFAULT_ACTIONS = ("CREATE", "UPDATE")


async def forced_skip(txn: Txn, dep: DeploymentRow) -> str:
    """Why *dep*'s DELETE config does not run: the stack is deleted with ``--force``."""
    server = await txn.get(ServerRow, dep.server_id)
    name = server.name if server is not None else dep.server_id
    return f"DELETE not run on server {name}: skipped by `anneal stack delete --force`"


class SoftwareConfig:
    """An immutable config: any change makes a new one (Heat: every property replaces)."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        if res.external_id is not None:
            return await self._adopt(txn, res, res.external_id)
        config_id = str(uuid.uuid4())
        body = await self.body(txn, res, props)
        txn.add(
            ConfigRow(
                id=config_id,
                stack_id=res.stack.id,
                project=res.stack.project,
                name=f"{res.stack.name}-{res.name}",
                group=self.group(props),
                body=body,
                created_at=time.time(),
            )
        )
        return done(config_id, **self.attributes(body))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        return REPLACE

    async def replacement(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> str | None:
        return "a config never changes: any change makes a new one"

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        if row.physical_id and KEPT not in (row.attributes or {}):  # an adopted config outlives the stack
            # A config the step preloaded goes with the flush (one executemany for a batch of
            # nested stacks' configs, engine/batch.py), not in a statement of its own.
            loaded = txn.session.sync_session.identity_map.get(identity_key(ConfigRow, row.physical_id))
            if loaded is not None:
                await txn.session.delete(loaded)
            else:
                await txn.session.execute(delete(ConfigRow).where(ConfigRow.id == row.physical_id))
        return done()

    async def _adopt(self, txn: Txn, res: Res, config_id: str) -> Outcome:
        """external_id: an existing config of the stack's project, by id; the properties unused."""
        found = await txn.get(ConfigRow, config_id)
        if found is None or found.project != res.stack.project:
            raise BadRequestError(
                f"external_id {config_id!r}: no software config of this project has that id",
                where=f"{res.where}.external_id",
            )
        return done(found.id, **self.attributes(found.body or {}))

    def group(self, props: Mapping[str, Any]) -> str:
        return str(props.get("group") or "Heat::Ungrouped")

    async def body(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> dict[str, Any]:
        """The stored config: ``{config, inputs, outputs, options}``."""
        return {k: props.get(k) for k in ("config", "inputs", "outputs", "options")}

    def attributes(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {"config": body.get("config")}


class SoftwareComponent(SoftwareConfig):
    """OS::Heat::SoftwareComponent: one config per set of actions, stored as Heat stores it."""

    def group(self, props: Mapping[str, Any]) -> str:
        return COMPONENT_GROUP

    async def body(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> dict[str, Any]:
        configs = [
            {
                "actions": list(c.get("actions") or DEFAULT_ACTIONS),
                "config": c.get("config") or "",
                "tool": c.get("tool"),
            }
            for c in props.get("configs") or []
        ]
        clash = hot.component_action_clash(configs)
        if clash is not None:
            index, problem = clash
            raise BadRequestError(problem, where=f"{res.where}.properties.configs[{index}].actions")
        body = {k: props.get(k) for k in ("inputs", "outputs", "options")}
        body["config"] = {"configs": configs}
        return body

    def attributes(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {"configs": body["config"]["configs"], "config": body["config"]}


class SoftwareDeployment:
    """OS::Heat::SoftwareDeployment: runs its config on its server for the actions it lists.

    The methods that take a ``member`` name also serve deployment groups, whose members
    are deployments without resource rows of their own.
    """

    structured = False

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        self.note_transport(txn, res, props)
        return self._outcome(await self.start(txn, res, props, res.name))

    def note_transport(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> None:
        """Say so in an event when a Heat signal transport is served by another one here."""
        note = deploy.signal_transport_note(self._transport(txn, res, props), deploy.has_swift(txn))
        if note:
            warn(txn, res, note)

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        dep = await txn.get(DeploymentRow, row.physical_id or "")
        if dep is None:
            return REPLACE
        if not await self.revise(txn, res, dep, row.properties or {}, props):
            return REPLACE
        return self._outcome(dep)

    async def replacement(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> str | None:
        dep = await txn.get(DeploymentRow, row.physical_id or "")
        if dep is None:
            return "its deployment is gone"
        return await self.replaced_because(txn, res, dep, row.properties or {}, props)

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        dep = await txn.get(DeploymentRow, row.physical_id or "")
        if dep is None:
            return done()
        if res.stack.force_delete and "DELETE" in dep.actions:
            reason = await forced_skip(txn, dep)
            warn(txn, res, reason, "DELETE")
            await forget_deployment(txn, dep)
            return Outcome("COMPLETE", reason=reason)
        if await self.retire(txn, res, dep, row.properties or {}):
            return Outcome("IN_PROGRESS", dep.id)
        reason = await self.delete_skipped(txn, dep)
        await forget_deployment(txn, dep)
        return Outcome("COMPLETE", reason=reason) if reason else done()

    async def suspend(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return await self._lifecycle(txn, res, row, "SUSPEND")

    async def resume(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return await self._lifecycle(txn, res, row, "RESUME")

    async def _lifecycle(self, txn: Txn, res: Res, row: ResourceRow, action: str) -> Outcome:
        dep = await txn.get(DeploymentRow, row.physical_id or "")
        if dep is None:
            return done(row.physical_id, **row.attributes)
        await self.run(txn, res, dep, row.properties or {}, action)
        return self._outcome(dep)

    async def start(self, txn: Txn, res: Res, props: Mapping[str, Any], member: str) -> DeploymentRow:
        """A new deployment named *member*; CREATE runs when it lists CREATE."""
        where = f"{res.where}.properties.server"
        server = await deploy.server_for(txn, props.get("server"), where, Within(res.stack.project))
        transport = self._transport(txn, res, props)
        source = await self.source(txn, res, props)
        now = time.time()
        dep = DeploymentRow(
            id=str(uuid.uuid4()),
            stack_id=res.stack.id,
            project=res.stack.project,
            resource_name=member,
            server_id=server.id,
            config_id=props.get("config") or None,
            actions=effective_actions(props, source),
            signal_transport=transport,
            status="COMPLETE",
            status_reason="CREATE is not among the deployment's actions",
            timeout=deploy.timeout_for(props, source, deploy.stack_timeout(txn, res.stack)),
            retry=_retry(res, props),
            input_values=dict(props.get("input_values") or {}),
            generation=0,
            created_at=now,
            updated_at=now,
        )
        dep.name = source.name
        txn.add(dep)
        await self._generation(txn, res, dep, source, "CREATE")
        return dep

    async def revise(
        self, txn: Txn, res: Res, dep: DeploymentRow, old: Mapping[str, Any], props: Mapping[str, Any]
    ) -> bool:
        """Update *dep* in place (UPDATE runs when listed); False when it must be replaced."""
        if await self.replaced_because(txn, res, dep, old, props) is not None:
            return False
        source = await self.source(txn, res, props)
        values = dict(props.get("input_values") or {})
        dep.config_id = props.get("config") or None
        dep.actions = effective_actions(props, source)
        dep.input_values = values
        dep.timeout = deploy.timeout_for(props, source, deploy.stack_timeout(txn, res.stack))
        dep.retry = _retry(res, props)
        await self._generation(txn, res, dep, source, "UPDATE")
        return True

    async def replaced_because(
        self, txn: Txn, res: Res, dep: DeploymentRow, old: Mapping[str, Any], props: Mapping[str, Any]
    ) -> str | None:
        """Why *props* make a new deployment (blue/green) instead of updating *dep*; None: in place."""
        if props.get("server") != old.get("server"):
            return "server changed"
        transport = self._transport(txn, res, props)
        if transport != dep.signal_transport:
            return f"signal_transport {dep.signal_transport} -> {transport}"
        source = await self.source(txn, res, props)
        if source.name != dep.name:
            return f"name {dep.name} -> {source.name}"
        changed = deploy.replace_on_change_differs(dep, source, dict(props.get("input_values") or {}))
        return f"replace_on_change input {changed} changed" if changed else None

    async def retire(self, txn: Txn, res: Res, dep: DeploymentRow, props: Mapping[str, Any]) -> bool:
        """Run DELETE on the server when listed; True while it runs (else forget *dep* now).

        As in Heat, DELETE runs even when no earlier action ever reached the server
        (a deployment listing only DELETE): its config is delivered for the first time.
        """
        server = await txn.get(ServerRow, dep.server_id)
        if server is None or server.status != "ENROLLED":
            return False
        await self.run(txn, res, dep, props, "DELETE")
        return "DELETE" in dep.actions and dep.status == "IN_PROGRESS"

    async def delete_skipped(self, txn: Txn, dep: DeploymentRow) -> str:
        """Why a deployment listing DELETE is removed without running it ("" when it is not listed).

        Its server's agent never enrolled: it never fetched a document, so nothing of
        this stack ever ran there and there is nothing to tear down. Waiting would hold
        the delete until the deployment times out for an agent that may never come, and
        the server's enrolment token dies with the stack, so it could not come anyway.
        """
        if "DELETE" not in dep.actions:
            return ""
        server = await txn.get(ServerRow, dep.server_id)
        if server is not None and server.status == "ENROLLED":
            return ""
        if server is None:  # as Heat does when the server is gone
            return f"DELETE not run: server {dep.server_id} no longer exists"
        return f"DELETE not run: server {server.name} never enrolled, so nothing ran there"

    async def reapply(self, txn: Txn, res: Res, dep: DeploymentRow, props: Mapping[str, Any]) -> None:
        """Run *dep*'s last action again as a new generation (``stack converge``)."""
        source = await self.source(txn, res, props, dep.name)
        action = dep.action if dep.action in dep.actions else "UPDATE"
        deploy.start_generation(txn, dep, source, action, res.stack_path)

    async def run(
        self, txn: Txn, res: Res, dep: DeploymentRow, props: Mapping[str, Any], action: str
    ) -> None:
        """Give *dep* a generation for *action* if it lists it; else leave the server alone."""
        await self._generation(txn, res, dep, await self.source(txn, res, props, dep.name), action)

    async def _generation(
        self, txn: Txn, res: Res, dep: DeploymentRow, source: deploy.Source, action: str
    ) -> None:
        if action in dep.actions:
            deploy.start_generation(txn, dep, source, action, res.stack_path)

    def _transport(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> str:
        transport = str(props.get("signal_transport") or txn.runtime.settings.default_signal_transport)
        if transport not in deploy.SUPPORTED_SIGNAL_TRANSPORTS:
            raise ControlError(
                f"signal_transport {transport} is not supported; use one of "
                f"{', '.join(deploy.SUPPORTED_SIGNAL_TRANSPORTS)}",
                where=f"{res.where}.properties.signal_transport",
            )
        return transport

    async def source(
        self, txn: Txn, res: Res, props: Mapping[str, Any], name: str | None = None
    ) -> deploy.Source:
        config_id = props.get("config") or None
        body: Mapping[str, Any] = {}
        group, config_name = "Heat::Ungrouped", ""
        if config_id:
            row = await txn.get(ConfigRow, str(config_id))
            if row is None:
                raise ControlError(
                    f"software config {config_id!r} not found", where=f"{res.where}.properties.config"
                )
            body, group, config_name = row.body, row.group, row.name
        empty: Any = {} if self.structured else ""
        return deploy.Source(
            group=group,
            config=body.get("config") if body.get("config") is not None else empty,
            inputs=tuple(body.get("inputs") or ()),
            outputs=tuple(body.get("outputs") or ()),
            options=body.get("options"),
            name=name or str(props.get("name") or config_name or f"{res.stack.name}-{res.name}"),
            input_key=str(props.get("input_key") or "get_input") if self.structured else None,
            strict=self.structured and props.get("input_values_validate") == "STRICT",
            where=f"{res.where}.properties.config",
        )

    @staticmethod
    def _outcome(dep: DeploymentRow) -> Outcome:
        # The generation rides on the outcome: a deployment added in this step is not in
        # the session's identity map until a flush, so the engine cannot look it up there.
        if dep.status == "IN_PROGRESS":
            return Outcome("IN_PROGRESS", dep.id, generation=dep.generation)
        return Outcome("COMPLETE", dep.id, deploy.attributes(dep), generation=dep.generation)


def _retry(res: Res, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `retry` policy the server's agent runs (None: one attempt); resolved values checked here."""
    try:
        return hot.retry_policy(props.get("retry"), f"{res.where}.properties.retry")
    except hot.TemplateError as e:
        raise ControlError(e.reason, where=e.path) from e


def effective_actions(props: Mapping[str, Any], source: deploy.Source) -> list[str]:
    """The actions that run: a component's configs decide, else the deployment's ``actions``."""
    if source.group == COMPONENT_GROUP and isinstance(source.config, Mapping):
        listed: list[str] = []
        for entry in source.config.get("configs") or []:
            listed += [a for a in entry.get("actions") or DEFAULT_ACTIONS if a not in listed]
        return listed
    return list(props.get("actions") or DEFAULT_ACTIONS)


async def forget_deployment(txn: Txn, dep: DeploymentRow) -> None:
    """Remove a deployment and take its derived config off the server."""
    server = await txn.get(ServerRow, dep.server_id)
    if server is not None and dep.item is not None:
        txn.publish.add(server.id)
    await txn.session.delete(dep)
