"""A server whose agent lost its state dir: detected at enrolment, decided here, shown to operators.

An enrolled server whose agent enrols again with *different* public keys has a new state
dir: the server was rebuilt or re-imaged, and its agent's run-once ledger is gone. The
control plane does not guess what still holds on that machine. It decides, explicitly:
**re-run everything, as on a new server** — every deployment currently on the server gets
a new generation (a new derived config id, a new signal URL), and its result is recorded
as that generation's. The decision is kept in the server's ``agent_status.rebuild``
(``anneal server show``) and in an event on each stack touched. Enrolling again with the
same keys (a new credential, the same state dir) is not a rebuild and re-runs nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from typing import Any

from sqlalchemy import select

from control.documents import hashing, seal
from control.documents.render import iso
from control.resources import deploy
from control.store.orm import DeploymentRow, ServerRow
from control.txn import Txn

log = logging.getLogger(__name__)
DECISION = "re-run every deployment on it as on a new server"


def is_rebuild(server: ServerRow, new_keys: dict[str, Any]) -> bool:
    """An enrolled server's agent came back with other keys: its state dir was lost."""
    return bool(server.credential_hash and server.public_keys and server.public_keys != new_keys)


def _regenerate(txn: Txn, dep: DeploymentRow, reason: str) -> int:
    """A new generation of the item already on the server, with fresh derived inputs."""
    item, config_secret = seal.load_item(dep.item, f"deployment {dep.id}")
    stack_path = str(item.input_value("deploy_stack_id") or "")
    dep.generation += 1
    derived = deploy.derived_inputs(txn, dep, stack_path, dep.action)
    names = {i.name for i in derived}
    kept = [i for i in item.inputs if i.name not in names and not i.name.startswith("deploy_")]
    now = time.time()
    new = dataclasses.replace(item, id=str(uuid.uuid4()), creation_time=iso(now), inputs=(*kept, *derived))
    dep.item, dep.item_id = seal.stored_item(new, config_secret), new.id
    dep.hash = hashing.idempotency_hash(new, dep.action, txn.runtime.keys.data_key)
    dep.started_at, dep.completed_at, dep.updated_at = now, None, now
    dep.stdout, dep.stderr, dep.status_code, dep.signal_nonce = "", "", None, None
    dep.outputs = {}
    if dep.signal_transport == "NO_SIGNAL":
        dep.status, dep.status_reason, dep.completed_at = "COMPLETE", "Not waiting for outputs signal", now
    else:
        dep.status, dep.status_reason = "IN_PROGRESS", reason
    txn.publish.add(dep.server_id)
    return dep.generation


async def rerun_as_new(txn: Txn, server: ServerRow, new_keys: dict[str, Any]) -> dict[str, Any]:
    """Apply the decision for a rebuilt server; returns what is recorded in agent_status.rebuild."""
    reason = f"server {server.name} was rebuilt (its agent came back with a new key): {DECISION}"
    rows = list(
        await txn.session.scalars(
            select(DeploymentRow).where(DeploymentRow.server_id == server.id, DeploymentRow.item.is_not(None))
        )
    )
    rerun = []
    for dep in rows:
        if dep.action == "DELETE":
            continue
        generation = _regenerate(txn, dep, reason)
        rerun.append({"deployment_id": dep.id, "name": dep.name, "generation": generation})
        if dep.stack_id:
            txn.event(dep.stack_id, dep.resource_name, dep.action, dep.status, reason, deployment_id=dep.id)
    record = {
        "detected_at": time.time(),
        "previous_sign_key": (server.public_keys or {}).get("sign"),
        "new_sign_key": new_keys.get("sign"),
        "decision": DECISION,
        "rerun": rerun,
    }
    log.warning("%s: %d deployments re-run", reason, len(rerun))
    return record
