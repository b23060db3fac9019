"""Software deployments made outside any stack (Heat's software_deployments API), and every deployment's Heat view.

A deployment made here runs on its server's agent like a stack's: it gets a
generation, a derived config in the server's document and a signal URL. The config
the openstack CLI sends is one it derived itself, its ``deploy_*`` inputs filled in for
a signal it would set up (a Swift TempURL, or none); the control plane replaces them
with its own, so the result comes back (``signal_transport`` in the body picks
CFN_SIGNAL, HTTP or NO_SIGNAL; else the config's CFN_SIGNAL or HTTP; else the
control plane's default). Deployments a stack made are listed and shown here too, but
change only through their stack.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from control.documents import seal
from control.documents.seal import secret_strings
from control.errors import BadRequestError, ConflictError, NotFoundError
from control.principal import DEFAULT_PROJECT, Within
from control.resources import create_server, deploy, forget_deployment
from control.runtime import Runtime
from control.services.stacks import MASK, mask
from control.store.orm import ConfigRow, DeploymentRow, ServerRow
from control.txn import Txn, retried_on_race

#: Heat takes any action name for a deployment made through its API (its own tests use ACTION0);
#: the agent runs the config whatever the name. Kept to a short word: it is a column and a hook input.
_ACTION = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,15}$")
STATUSES = ("IN_PROGRESS", "COMPLETE", "FAILED")
#: Inputs a client-derived config carries for its own signal set-up: the control plane sets its own.
DERIVED = frozenset(
    {
        "deploy_server_id",
        "deploy_action",
        "deploy_signal_transport",
        "deploy_signal_id",
        "deploy_signal_verb",
        "deploy_stack_id",
        "deploy_resource_name",
    }
)
RESULT_KEYS = ("deploy_stdout", "deploy_stderr", "deploy_status_code")


def _source(row: ConfigRow, name: str) -> tuple[deploy.Source, dict[str, Any], str | None]:
    """What *row* deploys, the input values it carries (a client-derived config's), and its signal transport."""
    values: dict[str, Any] = {}
    inputs = []
    transport = None
    for decl in row.body.get("inputs") or []:
        if decl["name"] == "deploy_signal_transport":
            transport = decl.get("value")
        if decl["name"] in DERIVED:
            continue
        if "value" in decl:
            values[decl["name"]] = decl["value"]
        inputs.append({k: v for k, v in decl.items() if k != "value"})
    config = row.body.get("config")
    source = deploy.Source(
        group=row.group,
        config=config if config is not None else "",
        inputs=tuple(inputs),
        outputs=tuple(row.body.get("outputs") or ()),
        options=row.body.get("options"),
        name=name or row.name or f"deployment-{row.id[:8]}",
        where="config_id",
    )
    return source, values, transport if isinstance(transport, str) else None


def _choice(body: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = body.get(key) or default
    if value not in allowed:
        raise BadRequestError(f"{key}: {value!r} is not one of {', '.join(allowed)}", where=key)
    return str(value)


def _action(body: Mapping[str, Any], default: str) -> str:
    value = body.get("action") or default
    if not isinstance(value, str) or not _ACTION.match(value):
        raise BadRequestError(
            f"action: {value!r} is not an action name (a letter, then up to 15 letters, digits or '_')",
            where="action",
        )
    return value


async def _server(txn: Txn, ref: Any, project: str, within: Within) -> ServerRow:
    """The server named or with id *ref*; an unknown one is made, awaiting its agent, with *ref* as id and name.

    Heat keeps a deployment for any server id (the server may come later); here the server
    waits for an agent as a stack's DeployedServer does (`anneal server token NAME`). A new one
    is in *project*; an existing one must be visible *within*.
    """
    usable = isinstance(ref, str) and ref and len(ref) <= 64 and "/" not in ref
    # An id another project holds is not taken again (the 404 below); a name is per project.
    if (
        usable
        and await txn.get(ServerRow, ref) is None
        and await deploy.server_named(txn, ref, within) is None
    ):
        server, _ = await create_server(txn, ref, owner_stack_id=None, server_id=ref, project=project)
        return server
    return await deploy.server_for(txn, ref, "server_id", within)


def _values(body: Mapping[str, Any]) -> dict[str, Any] | None:
    given = body.get("input_values")
    if given is not None and not isinstance(given, Mapping):
        raise BadRequestError("input_values: expected an object of input name -> value", where="input_values")
    return None if given is None else dict(given)


def _transport(rt: Runtime, body: Mapping[str, Any], derived: str | None) -> str:
    given = body.get("signal_transport")
    if given is not None:
        return _choice(body, "signal_transport", deploy.SUPPORTED_SIGNAL_TRANSPORTS, "")
    if derived in ("CFN_SIGNAL", "HTTP"):
        return derived
    return rt.settings.default_signal_transport


async def _config(session: AsyncSession, config_id: Any, within: str | None) -> ConfigRow:
    """The config *config_id*, of project *within* (None: any project, for an admin)."""
    if not isinstance(config_id, str) or not config_id:
        raise BadRequestError("config_id: a software config id is required", where="config_id")
    row = await session.get(ConfigRow, config_id)
    if row is None or within not in (None, row.project):
        raise NotFoundError(f"config_id: software config {config_id} not found", where="config_id")
    return row


async def create_deployment(
    rt: Runtime, body: Mapping[str, Any], project: str = DEFAULT_PROJECT, within: str | None = None
) -> dict[str, Any]:
    """A deployment of ``config_id`` on ``server_id`` (an Anneal server's id or name) for ``action``.

    ``status`` IN_PROGRESS (the default) runs it on the server now; COMPLETE or FAILED
    records work done elsewhere and delivers nothing.
    """
    action = _action(body, "UPDATE")
    status = _choice(body, "status", STATUSES, "IN_PROGRESS")
    given = _values(body) or {}
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        seen_in = Within(within) if within is not None else Within(project, admin=True)
        server = await _server(txn, body.get("server_id"), project, seen_in)
        row = await _config(session, body.get("config_id"), within)
        source, values, derived = _source(row, "")
        now = time.time()
        dep = DeploymentRow(
            id=str(uuid.uuid4()),
            project=project,
            stack_id=None,
            server_id=server.id,
            config_id=row.id,
            name=source.name,
            actions=[action],
            action=action,
            signal_transport=_transport(rt, body, derived),
            status=status,
            status_reason=str(body.get("status_reason") or f"recorded as {status}: nothing ran"),
            timeout=deploy.timeout_for({}, source, rt.settings.deployment_timeout),
            input_values={**values, **given},
            generation=0,
            created_at=now,
            updated_at=now,
        )
        txn.add(dep)
        if status == "IN_PROGRESS":
            deploy.start_generation(txn, dep, source, action, "")
        await txn.commit()
        return deployment_view(dep, set())


async def _standalone(session: AsyncSession, dep_id: str) -> DeploymentRow:
    dep = await session.get(DeploymentRow, dep_id)
    if dep is None:
        raise NotFoundError(f"Deployment with id {dep_id} not found", where="deployment")
    if dep.stack_id is not None:
        raise ConflictError(
            f"software deployment {dep_id} belongs to a stack (resource {dep.resource_name}): "
            "change it through its stack",
            where="deployment",
        )
    return dep


@retried_on_race
async def update_deployment(
    rt: Runtime, dep_id: str, body: Mapping[str, Any], within: str | None = None
) -> dict[str, Any]:
    """A new ``config_id``, ``input_values`` or ``action`` runs again as a new generation; ``status``
    (with ``output_values`` and ``status_reason``) records a result, as a signal would."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        dep = await _standalone(session, dep_id)
        given = _values(body)
        recorded = body.get("status") not in (None, "IN_PROGRESS")
        if body.get("config_id") is not None or given is not None or (body.get("action") and not recorded):
            row = await _config(session, body.get("config_id") or dep.config_id, within)
            source, values, _ = _source(row, dep.name)
            base = dep.input_values if row.id == dep.config_id else values
            action = _action(body, dep.action)
            dep.config_id, dep.actions, dep.input_values = row.id, [action], {**base, **(given or {})}
            deploy.start_generation(txn, dep, source, action, "")
        elif body.get("status") is not None:
            dep.action = _action(body, dep.action)  # a result recorded for an action, as Heat's hooks send it
            _record(dep, body)
        await txn.commit()
        return deployment_view(dep, set())


def _record(dep: DeploymentRow, body: Mapping[str, Any]) -> None:
    """A result given by hand: status, reason, output values (deploy_stdout... among them)."""
    dep.status = _choice(body, "status", STATUSES, dep.status)
    outputs = body.get("output_values") or {}
    if not isinstance(outputs, Mapping):
        raise BadRequestError("output_values: expected an object", where="output_values")
    now = time.time()
    dep.status_reason = str(body.get("status_reason") or f"{dep.status} (set through the API)")
    dep.outputs = {**dep.outputs, **{k: v for k, v in outputs.items() if k not in RESULT_KEYS}}
    if "deploy_stdout" in outputs:
        dep.stdout = str(outputs["deploy_stdout"])
    if "deploy_stderr" in outputs:
        dep.stderr = str(outputs["deploy_stderr"])
    code = outputs.get("deploy_status_code")
    if code is not None:
        try:
            dep.status_code = int(code)
        except (TypeError, ValueError) as e:
            raise BadRequestError(
                f"output_values.deploy_status_code: not a number: {code!r}", where="output_values"
            ) from e
    dep.completed_at = None if dep.status == "IN_PROGRESS" else now
    dep.updated_at = now


@retried_on_race
async def delete_deployment(rt: Runtime, dep_id: str) -> None:
    """Remove the deployment and take its derived config off its server (nothing runs there: Heat's rule)."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        await forget_deployment(txn, await _standalone(session, dep_id))
        await txn.commit()


async def list_deployments(
    session: AsyncSession, server_id: str | None, project: str | None = None
) -> list[dict[str, Any]]:
    """Deployments (of *project*; None: every project), on *server_id* if given."""
    stmt = select(DeploymentRow).order_by(DeploymentRow.created_at, DeploymentRow.id)
    if project is not None:
        stmt = stmt.where(DeploymentRow.project == project)
    if server_id:
        stmt = stmt.where(DeploymentRow.server_id == server_id)
    secrets: dict[str | None, set[str]] = {}
    found = []
    for dep in await session.scalars(stmt):
        if dep.stack_id not in secrets:
            secrets[dep.stack_id] = await secret_strings(session, dep.stack_id)
        found.append(deployment_view(dep, secrets[dep.stack_id]))
    return found


async def show_deployment(session: AsyncSession, dep_id: str) -> dict[str, Any]:
    dep = await session.get(DeploymentRow, dep_id)
    if dep is None:
        raise NotFoundError(f"Deployment with id {dep_id} not found", where="deployment")
    return deployment_view(dep, await secret_strings(session, dep.stack_id))


def deployment_view(dep: DeploymentRow, secrets: set[str]) -> dict[str, Any]:
    """Heat's deployment (heat/engine/api.py format_software_deployment); times as seconds, secrets masked."""
    hidden = {i["name"] for i in (dep.item or {}).get("inputs") or [] if i.get("secret")}
    secrets = secrets | seal.texts_for(dep.item)  # what the hook wrote back may quote a secret input
    outputs = dict(dep.outputs or {})
    if dep.status_code is not None or dep.stdout or dep.stderr:
        outputs.update(deploy_stdout=dep.stdout, deploy_stderr=dep.stderr, deploy_status_code=dep.status_code)
    return {
        "id": dep.id,
        "server_id": dep.server_id,
        "config_id": dep.config_id,
        "input_values": mask({k: MASK if k in hidden else v for k, v in dep.input_values.items()}, secrets),
        "output_values": mask(outputs, secrets),
        "action": dep.action,
        "status": dep.status,
        "status_reason": dep.status_reason,
        "creation_time": dep.created_at,
        "updated_time": dep.updated_at,
    }
