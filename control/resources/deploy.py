"""Software deployments: derived configs, generations, attributes.

A deployment's *generation* counts the actions it has been given; each
generation gets a fresh derived config (Heat's rule: a new id per action) and
a signal URL valid for that generation only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent import wire
from control import hot
from control.documents import hashing, heatauth, seal
from control.documents.render import iso
from control.errors import BadRequestError, NotFoundError
from control.hot import taint
from control.principal import Within
from control.settings import Settings
from control.store import names
from control.store.orm import DeploymentRow, ServerRow, StackRow
from control.transports.publisher import Transports
from control.txn import Txn

SUPPORTED_SIGNAL_TRANSPORTS = hot.SUPPORTED_SIGNAL_TRANSPORTS
#: Heat's transports this control plane has no service for, and the one that serves them instead.
SIGNAL_STAND_INS = {"ZAQAR_SIGNAL": "HEAT_SIGNAL"}
_DERIVED_DESCRIPTIONS = {
    "deploy_server_id": "The server this deployment runs on",
    "deploy_action": "The lifecycle action being run",
    "deploy_stack_id": "stack_name/stack_id of the owning stack",
    "deploy_resource_name": "The deployment's resource name in its stack",
    "deploy_signal_transport": "How the result is signalled back",
    "deploy_signal_id": "Where to send the result",
    "deploy_signal_verb": "HTTP method for the result",
    "deploy_auth_url": "URL for API authentication",
    "deploy_username": "Username for API authentication",
    "deploy_user_id": "User ID for API authentication",
    "deploy_password": "Password for API authentication",
    "deploy_project_id": "ID of project for API authentication",
    "deploy_region_name": "Region name for API authentication",
}


@dataclass(frozen=True)
class Source:
    """What a deployment applies: the source config and the values for its inputs."""

    group: str
    config: Any
    inputs: tuple[Mapping[str, Any], ...]
    outputs: tuple[Mapping[str, Any], ...]
    options: Mapping[str, Any] | None
    name: str
    input_key: str | None = None  # structured: maps {input_key: NAME} become the input's value
    strict: bool = False  # structured: a NAME that is not an input is an error (else null)
    where: str = "config"


def timeout_for(props: Mapping[str, Any], source: Source, default: float) -> float:
    """Seconds a generation may take: the deployment's `timeout`, else its config's option, else *default*."""
    for value in (props.get("timeout"), (source.options or {}).get("timeout")):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
        if isinstance(value, str):
            try:
                if float(value) > 0:
                    return float(value)
            except ValueError:
                pass
    return default


def stack_timeout(txn: Txn, stack: StackRow) -> float:
    """The default timeout of a stack's deployments: its timeout_mins (Heat's), else the control plane's."""
    if stack.timeout_mins:
        return float(stack.timeout_mins) * txn.runtime.settings.timeout_minute
    return txn.runtime.settings.deployment_timeout


def stack_minutes(settings: Settings, stack: StackRow) -> int | None:
    """The minutes the stack's actions may take: its timeout_mins, else the operator's
    ``--stack-timeout`` (Heat's stack_action_timeout); None: no timeout."""
    return stack.timeout_mins or settings.stack_timeout or None


def start_deadline(settings: Settings, stack: StackRow, now: float | None = None) -> None:
    """Give the stack's starting action its deadline: ``stack_minutes`` from now (none without).

    A minute lasts ``settings.timeout_minute`` seconds (``--timeout-minute``; tests shorten it).
    """
    start = time.time() if now is None else now
    minutes = stack_minutes(settings, stack)
    stack.deadline = start + minutes * settings.timeout_minute if minutes else None


def declared_inputs(source: Source, values: Mapping[str, Any]) -> list[wire.InputItem]:
    """Declared inputs with their values (or defaults), then undeclared values as Strings.

    A value derived from a secret makes its input secret (sealed in the document); a
    secret default is left out of the declaration the document shows.
    """
    left = dict(values)
    items = []
    for decl in source.inputs:
        name, default = str(decl["name"]), decl.get("default")
        value = left.pop(name, default)
        items.append(
            wire.InputItem(
                name=name,
                value=taint.reveal(value),
                type=str(decl.get("type") or "String"),
                description=decl.get("description"),
                default=None if taint.tainted(default) else default,
                replace_on_change=bool(decl.get("replace_on_change", False)),
                secret=bool(decl.get("secret", False)) or taint.tainted(value),
            )
        )
    items.extend(
        wire.InputItem(name=k, value=taint.reveal(v), secret=taint.tainted(v)) for k, v in left.items()
    )
    return items


def derived_inputs(txn: Txn, dep: DeploymentRow, stack_path: str, action: str) -> list[wire.InputItem]:
    """The deploy_* inputs Heat's agents and hooks expect, for the signal transport in force."""
    transport = SIGNAL_STAND_INS.get(dep.signal_transport, dep.signal_transport)
    values: dict[str, Any] = {
        "deploy_server_id": dep.server_id,
        "deploy_action": action,
        "deploy_stack_id": stack_path,
        "deploy_resource_name": dep.resource_name,
        "deploy_signal_transport": transport,
    }
    if transport in ("CFN_SIGNAL", "HTTP"):
        values["deploy_signal_id"] = signal_url(txn, dep.id, dep.generation, transport)
        values["deploy_signal_verb"] = "POST"
    elif transport == "TEMP_URL_SIGNAL":
        values["deploy_signal_id"] = temp_url(txn, dep.id, dep.generation)
        values["deploy_signal_verb"] = "PUT"
    elif transport == "HEAT_SIGNAL":
        values.update(heat_credentials(txn, dep, stack_path))
    return [
        wire.InputItem(name=k, value=v, description=_DERIVED_DESCRIPTIONS[k], secret=k == "deploy_password")
        for k, v in values.items()
    ]


def signal_url(txn: Txn, deployment_id: str, generation: int, transport: str) -> str:
    """CFN_SIGNAL URLs carry their own capability; HTTP ones need the agent's credential."""
    base = f"{txn.runtime.settings.base_url}/v1/signal/{deployment_id}/{generation}"
    if transport == "CFN_SIGNAL":
        return f"{base}?sig={txn.runtime.keys.signal_signature(deployment_id, generation)}"
    return base


def heat_credentials(txn: Txn, dep: DeploymentRow, stack_path: str) -> dict[str, Any]:
    """HEAT_SIGNAL's inputs: the deployment's own user, which may signal that deployment only."""
    user = heatauth.user_id("deployment", dep.id)
    return {
        "deploy_auth_url": heatauth.auth_url(txn.runtime.settings.base_url),
        "deploy_username": user,
        "deploy_user_id": user,
        "deploy_password": heatauth.password(txn.runtime.keys, user),
        "deploy_project_id": stack_path.rpartition("/")[2],
        "deploy_region_name": heatauth.REGION,
    }


def temp_url(txn: Txn, deployment_id: str, generation: int) -> str:
    """TEMP_URL_SIGNAL: a Swift PUT TempURL when Swift is configured, else our own capability URL."""
    publisher = txn.runtime.publisher
    found = (
        publisher.signal_url("SWIFT", deployment_id, generation)
        if isinstance(publisher, Transports)
        else None
    )
    if found:
        return found
    sig = txn.runtime.keys.capability("temp-url-signal", f"{deployment_id}:{generation}")
    return f"{txn.runtime.settings.base_url}/v1/signal/{deployment_id}/{generation}?sig={sig}"


def has_swift(txn: Txn) -> bool:
    publisher = txn.runtime.publisher
    return isinstance(publisher, Transports) and "SWIFT" in publisher.stores


def signal_transport_note(transport: str, swift: bool) -> str:
    """What serves a Heat signal transport this control plane has no service of its own for ("" when none)."""
    if transport == "ZAQAR_SIGNAL":
        return (
            "signal_transport ZAQAR_SIGNAL: this control plane has no Zaqar; the result comes back as "
            "HEAT_SIGNAL does (Heat's agents: the deployment's user signals the resource through the "
            "Heat API here; our agent: its own credential)"
        )
    if transport == "TEMP_URL_SIGNAL" and not swift:
        return (
            "signal_transport TEMP_URL_SIGNAL: no Swift store is configured; the result is PUT to a "
            "URL of this control plane that carries its own capability, as a TempURL would"
        )
    return ""


def start_generation(txn: Txn, dep: DeploymentRow, source: Source, action: str, stack_path: str) -> None:
    """Give *dep* a new generation for *action* and put its derived config on the server."""
    now = time.time()
    dep.generation += 1
    dep.action = action
    values = dict(dep.input_values)
    inputs = declared_inputs(source, values) + derived_inputs(txn, dep, stack_path, action)
    config = source.config
    if source.input_key is not None:  # a secret input's value makes the config secret where it lands
        given = {
            i.name: taint.Secret(i.value) if i.secret or seal.is_credential(i) else i.value for i in inputs
        }
        config = substitute_inputs(config, source.input_key, given, source.strict, source.where)
    item = wire.DeploymentItem(
        id=str(uuid.uuid4()),
        name=source.name,
        group=source.group,
        creation_time=iso(now),
        config=taint.reveal(config),
        inputs=tuple(inputs),
        outputs=tuple(wire.decode_output(o, "outputs") for o in source.outputs),
        options=dict(source.options) if source.options is not None else None,
    )
    dep.item = seal.stored_item(item, config_secret=taint.tainted(config))
    dep.item_id = item.id
    dep.name = source.name
    dep.hash = hashing.idempotency_hash(item, action, txn.runtime.keys.data_key)
    dep.started_at = now
    dep.completed_at = None
    dep.updated_at = now
    dep.stdout, dep.stderr, dep.status_code, dep.signal_nonce = "", "", None, None
    dep.attempts = None
    dep.progress = None
    dep.outputs = {}
    if dep.signal_transport == "NO_SIGNAL":
        dep.status, dep.status_reason = "COMPLETE", "Not waiting for outputs signal"
        dep.completed_at = now
    else:
        dep.status, dep.status_reason = "IN_PROGRESS", "Deploy data available"
    txn.publish.add(dep.server_id)


def substitute_inputs(node: Any, key: str, inputs: Mapping[str, Any], strict: bool, where: str) -> Any:
    """Replace every map ``{key: NAME}`` in *node* by input NAME's value (Heat's StructuredDeployment)."""
    if isinstance(node, taint.Secret):
        return taint.Secret(substitute_inputs(node.value, key, inputs, strict, where))
    if isinstance(node, Mapping):
        if len(node) == 1 and key in node:
            name = node[key]
            if not isinstance(name, str) or (strict and name not in inputs):
                raise BadRequestError(
                    f"{key}: {name!r} is not an input of this deployment "
                    f"(inputs: {', '.join(sorted(inputs))})",
                    where=where,
                )
            return inputs.get(name)
        return {k: substitute_inputs(v, key, inputs, strict, f"{where}.{k}") for k, v in node.items()}
    if isinstance(node, list):
        return [substitute_inputs(v, key, inputs, strict, f"{where}[{i}]") for i, v in enumerate(node)]
    return node


def item_inputs(dep: DeploymentRow) -> dict[str, Any]:
    """The input values of the derived config currently on the server."""
    if not dep.item:
        return {}
    return {i["name"]: i.get("value") for i in dep.item.get("inputs", [])}


def replace_on_change_differs(dep: DeploymentRow, source: Source, values: Mapping[str, Any]) -> str | None:
    """The first input flagged replace_on_change that would get a different value (None: none)."""
    if dep.item is not None:
        old = item_inputs(dep)
    else:  # never ran on the server: compare with the values it was last given (Heat's rule)
        old = {i.name: i.value for i in declared_inputs(source, dep.input_values)}
    for item in declared_inputs(source, values):
        if item.replace_on_change and old.get(item.name) != item.value:
            return item.name
    return None


def attributes(dep: DeploymentRow) -> dict[str, Any]:
    """What get_attr sees on a deployment resource."""
    out: dict[str, Any] = dict(dep.outputs or {})
    out["deploy_stdout"] = dep.stdout if dep.status_code is not None else None
    out["deploy_stderr"] = dep.stderr if dep.status_code is not None else None
    out["deploy_status_code"] = dep.status_code
    return out


async def server_for(txn: Txn, ref: Any, where: str, within: Within) -> ServerRow:
    """A deployment's server, named by id or by name, as *within* sees them (another project's is not found)."""
    if not isinstance(ref, str) or not ref:
        raise BadRequestError(f"server must be a server id or name, got {ref!r}", where=where)
    server = await visible_server(txn, ref, within)
    if server is None:
        raise NotFoundError(f"server {ref!r} not found", where=where)
    return server


async def visible_server(txn: Txn, ref: str, within: Within) -> ServerRow | None:
    """The server with id *ref*, if *within* sees it, else the one called *ref* where *within* resolves names."""
    server = await txn.get(ServerRow, ref)
    if server is not None and within.holds(server.project):
        return server
    return await server_named(txn, ref, within)


async def server_named(txn: Txn, name: str, within: Within) -> ServerRow | None:
    """The server called *name* where *within* resolves names, one this transaction created included, without
    a flush (names are unique per project: ``control/store/names.py``)."""
    server = txn.created_row(ServerRow, name_key(within.project, name)) if within.project else None
    if server is None:
        with txn.session.no_autoflush:  # a server created in this step is in txn.created
            server = await names.by_name(txn.session, ServerRow, name, within)
    return server


def name_key(project: str | None, name: str) -> tuple[str, str | None, str]:
    """The key a new server is found by in its transaction (``Txn.created_row``) before the flush."""
    return ("name", project, name)
