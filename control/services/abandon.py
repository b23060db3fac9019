"""Abandon and adopt (Heat's `stack abandon` / `stack adopt`): a stack handed over without re-running anything.

Abandon answers Heat's abandon data and removes the stack, running nothing: its
servers, configs and deployments stay as they are, on their servers, detached from any
stack (Heat leaves a stack's physical resources the same way). Adopt makes a stack from
that data and re-attaches them: every resource is ADOPT_COMPLETE at once, nothing is
published or run, and a later update or delete acts on them as on any stack's.
Adoption is within one control plane: the agents trust its key already.

Secrets never leave in clear: a hidden parameter's value (given, or in the environment's
parameters) and every secret value of a resource's properties and attributes are sealed
with the control plane's data key (``crypt.seal``), and adopt opens them again. Data
sealed by another control plane is refused, naming where, unless the request gives that
parameter's value again.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from control.engine import stackdef
from control.errors import BadRequestError, ConflictError
from control.principal import DEFAULT_PROJECT, Within
from control.resources import DEPLOYMENT_TYPES
from control.resources.nested import store_definition
from control.resources.validate import check_definition
from control.runtime import Runtime
from control.services import handover
from control.services.abandon_data import KEPT, NESTED, Tree, abandon_data, nested_rows, opened_data
from control.services.stack_request import parse_request, rollback_wanted, tags_given, timeout_given
from control.services.stacks import check_stack_name, get_stack, stack_view
from control.store import names
from control.store.orm import ConfigRow, DeploymentRow, EventRow, ResourceRow, ServerRow, StackRow
from control.txn import Txn, retried_on_race


@retried_on_race
async def abandon_stack(
    rt: Runtime, name: str, to: handover.Target | None = None, *, within: Within
) -> dict[str, Any]:
    """Heat's abandon data for stack *name* and its nested stacks; gone, their servers and deployments untouched.

    With *to* (or a hand-over set on the stack), the servers are handed to that control plane.
    """
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, name, within=within)
        if stack.parent_id is not None:
            raise ConflictError(f"stack {name} is nested: abandon its top-level stack", where="name")
        tree = await _tree(session, stack)
        busy = next((s for s in (stack, *tree.nested) if s.status == "IN_PROGRESS"), None)
        if busy is not None:
            raise ConflictError(
                f"stack {busy.name} is {busy.action}_IN_PROGRESS; wait for it to finish", where="name"
            )
        target = to or (handover.Target(**stack.handover) if stack.handover else None)
        if target is not None:
            section, transfer, _ = await handover.export(rt, txn, tree.ids, tree.owned, target)
            data = {**abandon_data(tree, transfer), handover.SECTION: section}
        else:
            data = {**abandon_data(tree, rt.keys.data_key), KEPT: await _detach(txn, tree)}
        reason = "Stack ABANDON completed: nothing ran; its servers and deployments stay" + (
            f", handed to {target.url}" if target else ""
        )
        txn.event(stack.id, "", "ABANDON", "COMPLETE", reason, traversal=stack.traversal)
        await txn.write_events()
        for one in (stack, *tree.nested):
            await session.execute(
                update(EventRow).where(EventRow.stack_id == one.id).values(stack_name=one.name)
            )
        for row in await session.scalars(select(ResourceRow).where(ResourceRow.stack_id.in_(tree.ids))):
            await session.delete(row)
        for one in (*reversed(tree.nested), stack):
            await session.delete(one)
        await txn.commit()
        return data


async def _tree(session: AsyncSession, stack: StackRow) -> Tree:
    """*stack*, every stack nested in it (parents first), their current resources and the servers they made."""
    tree, level = Tree(stack), [stack.id]
    while level:
        found = list(await session.scalars(select(StackRow).where(StackRow.parent_id.in_(level))))
        tree.nested.extend(found)
        level = [s.id for s in found]
    query = select(ResourceRow).where(ResourceRow.stack_id.in_(tree.ids), ResourceRow.current.is_(True))
    tree.rows = list(await session.scalars(query))
    owners = select(ServerRow.id, ServerRow.owner_stack_id).where(ServerRow.owner_stack_id.in_(tree.ids))
    tree.owned = {sid: str(owner) for sid, owner in await session.execute(owners)}
    return tree


async def _attached(session: AsyncSession, tree: Tree) -> dict[str, Any]:
    """The tree's deployment and config ids, and the stacks of those (and of servers) not in its top: what
    adopt attaches again."""
    owners: dict[str, str] = {}
    kept: dict[str, Any] = {"owners": owners}
    for table, key in ((DeploymentRow, "deployments"), (ConfigRow, "configs")):
        query = select(table.id, table.stack_id).where(table.stack_id.in_(tree.ids))
        rows = list(await session.execute(query))
        kept[key] = sorted(ident for ident, _ in rows)
        owners.update({ident: str(owner) for ident, owner in rows if owner != tree.top.id})
    owners.update({f"server:{sid}": owner for sid, owner in tree.owned.items() if owner != tree.top.id})
    return kept


async def _detach(txn: Txn, tree: Tree) -> dict[str, Any]:
    """Leave the tree's deployments, configs and servers in no stack; their ids and stacks, for adopt."""
    session, ids = txn.session, tree.ids
    kept = await _attached(session, tree)
    for table in (DeploymentRow, ConfigRow):
        await session.execute(update(table).where(table.stack_id.in_(ids)).values(stack_id=None))
    await session.execute(
        update(ServerRow).where(ServerRow.owner_stack_id.in_(ids)).values(owner_stack_id=None)
    )
    return kept


def _data(body: Mapping[str, Any]) -> dict[str, Any]:
    raw = body.get("adopt_stack_data")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as e:
            raise BadRequestError(f"adopt_stack_data: not JSON: {e}", where="adopt_stack_data") from e
    if not isinstance(raw, Mapping):
        raise BadRequestError(
            "adopt_stack_data: expected the abandon data (an object)", where="adopt_stack_data"
        )
    for key in ("template", "resources"):
        if not isinstance(raw.get(key), Mapping):
            raise BadRequestError(
                f"adopt_stack_data.{key}: expected an object", where=f"adopt_stack_data.{key}"
            )
    return dict(raw)


def _kept(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    """What abandon kept for resource *name*; data not made by Anneal's abandon is refused, naming it."""
    where = f"adopt_stack_data.resources.{name}"
    entry = data["resources"].get(name)
    if not isinstance(entry, Mapping):
        raise BadRequestError(f"{where}: the template's resource has no abandon data", where=where)
    kept = (
        (entry.get("resource_data") or {}).get(KEPT)
        if isinstance(entry.get("resource_data"), Mapping)
        else None
    )
    if not isinstance(kept, Mapping):
        raise BadRequestError(
            f"{where}: not abandoned by Anneal (no resource_data.{KEPT}): only Anneal's abandon data is adopted",
            where=where,
        )
    return {**kept, "resource_id": entry.get("resource_id"), "type": entry.get("type")}


def _all_kept(data: Mapping[str, Any], names: list[str]) -> dict[str, dict[str, Any]]:
    """What abandon kept for each resource; data Heat made (or any not Anneal's) is refused naming
    every resource it cannot adopt, not only the first."""
    kept, refused = {}, []
    for name in names:
        try:
            kept[name] = _kept(data, name)
        except BadRequestError as e:
            refused.append((name, e))
    if len(refused) == 1:
        raise refused[0][1]
    if refused:
        raise BadRequestError(
            f"adopt_stack_data.resources: {', '.join(n for n, _ in refused)}: not abandoned by Anneal "
            f"(no resource_data.{KEPT}): only Anneal's abandon data is adopted (docs/heat-api.md)",
            where="adopt_stack_data.resources",
        )
    return kept


def _request(body: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """A create body from the abandon data, with what the adopt request gives over it."""
    envs = [json.dumps(data.get("environment") or {}), *(body.get("environments") or [])]
    return {
        "template": data["template"],
        "files": {**(data.get("files") or {}), **(body.get("files") or {})},
        "environments": envs,
        "parameters": {**(data.get("parameters") or {}), **(body.get("parameters") or {})},
    }


async def adopt_stack(rt: Runtime, body: Mapping[str, Any], project: str = DEFAULT_PROJECT) -> dict[str, Any]:
    """A stack *name* from Anneal's abandon data: ADOPT_COMPLETE at once, its deployments re-attached, nothing run."""
    name = check_stack_name(body.get("name"))
    given = body.get("parameters")
    raw = _data(body)
    transfer = handover.transfer_key(rt, raw)
    key = transfer or rt.keys.data_key
    data = opened_data(raw, given if isinstance(given, Mapping) else {}, key)
    nested = nested_rows(data, key)
    req = parse_request(_request(body, data), rt.settings.max_template_bytes)
    stack_id = str(uuid.uuid4())
    defn = stackdef.build(
        req.template, req.files, req.environment, req.parameters, stack_name=name, stack_id=stack_id
    )
    warnings = check_definition(defn.template)
    kept = _all_kept(data, defn.order())
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        if await names.taken(session, StackRow, name, project):
            raise ConflictError(f"stack {name!r} already exists", where="name")
        now = time.time()
        reason = "Stack ADOPT completed successfully"
        stack = StackRow(
            id=stack_id, project=project, name=name, action="ADOPT", status="COMPLETE", status_reason=reason,
            created_at=now, updated_at=now, version=1, traversal=1,
            tags=tags_given(body) or list(data.get("tags") or []),
            timeout_mins=timeout_given(body) or timeout_given(data),
        )  # fmt: skip
        store_definition(stack, req.template, req.files, req.environment, req.parameters, defn, warnings)
        stack.rollback = rollback_wanted(body if "disable_rollback" in body else data)
        session.add(stack)
        remap = {str(data.get("id") or ""): stack_id}  # nested stacks keep their ids
        await _nest(txn, nested, remap, project)
        if transfer is None:
            await _attach(txn, stack_id, data, kept)
        else:
            await handover.import_rows(txn, data, transfer, remap, project)
        txn.event(stack_id, "", "ADOPT", "IN_PROGRESS", "Stack ADOPT started", traversal=1)
        for res_name, k in kept.items():
            session.add(
                ResourceRow(
                    stack_id=stack_id, name=res_name, type=k["type"], action="ADOPT", status="COMPLETE",
                    status_reason="adopted", physical_id=k["resource_id"], properties=k.get("properties"),
                    attributes=dict(k.get("attributes") or {}), requires=list(k.get("requires") or []),
                    traversal=1, current=True, created_at=now, updated_at=now,
                )
            )  # fmt: skip
            txn.event(stack_id, res_name, "ADOPT", "COMPLETE", "adopted: nothing ran", traversal=1)
        txn.event(stack_id, "", "ADOPT", "COMPLETE", reason, traversal=1)
        await txn.commit()
        return stack_view(stack)


async def _nest(txn: Txn, nested: Mapping[str, Any], remap: Mapping[str, str], project: str) -> None:
    """The nested stacks again, as they were (definitions, facades, outputs), with their resources."""
    where = f"adopt_stack_data.{NESTED}"
    for rec in nested["stacks"]:
        if await txn.session.get(StackRow, rec["id"]) or await names.taken(
            txn.session, StackRow, rec["name"], project
        ):
            raise ConflictError(
                f"{where}: nested stack {rec['name']} ({rec['id']}) exists here already", where=where
            )
        parent = remap.get(rec["parent_id"], rec["parent_id"])
        txn.session.add(StackRow(**{**rec, "parent_id": parent}, project=project))
        txn.event(
            rec["id"], "", "ADOPT", "COMPLETE", "adopted (nested): nothing ran", traversal=rec["traversal"]
        )
    await txn.session.flush()  # the stacks before their resources: no relationship() orders them
    for rec in nested["resources"]:
        txn.session.add(ResourceRow(**rec))


async def _attach(txn: Txn, stack_id: str, data: Mapping[str, Any], kept: Mapping[str, Any]) -> None:
    """Re-attach the abandoned tree's deployments, configs and servers; each must be there, in no stack.

    Those of a nested stack go back to it (its id is kept); the others to the new top-level stack.
    """
    kept_ids = data.get(KEPT)
    ids: Mapping[str, Any] = kept_ids if isinstance(kept_ids, Mapping) else {}
    given = ids.get("owners")
    owners: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    rows: list[tuple[str, DeploymentRow | ConfigRow | None]] = []
    for ident in ids.get("deployments") or []:
        rows.append((f"deployment {ident}", await txn.session.get(DeploymentRow, str(ident))))
    for ident in ids.get("configs") or []:
        rows.append((f"config {ident}", await txn.session.get(ConfigRow, str(ident))))
    for what, row in rows:
        if row is None or row.stack_id is not None:
            state = "not found" if row is None else "belongs to another stack"
            raise ConflictError(f"adopt_stack_data: {what} {state}", where=f"adopt_stack_data.{KEPT}")
        row.stack_id = str(owners.get(row.id) or stack_id)
    for server_id, owner in ((k[7:], v) for k, v in owners.items() if k.startswith("server:")):
        server = await txn.session.get(ServerRow, server_id)
        if server is not None and server.owner_stack_id is None:
            server.owner_stack_id = str(owner)
    for res_name, k in kept.items():
        if k.get("owned_server"):
            server = await txn.session.get(ServerRow, str(k["resource_id"]))
            if server is None:
                raise ConflictError(
                    f"adopt_stack_data.resources.{res_name}: server {k['resource_id']} not found",
                    where=f"adopt_stack_data.resources.{res_name}",
                )
            server.owner_stack_id = server.owner_stack_id or stack_id
        if k["type"] in DEPLOYMENT_TYPES:
            dep = await txn.session.get(DeploymentRow, str(k["resource_id"]))
            if dep is not None:
                dep.resource_name = res_name


async def export_stack(rt: Runtime, name: str, *, within: Within) -> dict[str, Any]:
    """Heat's export: the abandon data of stack *name* and its nested stacks as they are now; the stack
    stays and nothing runs."""
    async with rt.sessions() as session:
        stack = await get_stack(session, name, within=within)
        if stack.parent_id is not None:
            raise ConflictError(f"stack {name} is nested: export its top-level stack", where="name")
        tree = await _tree(session, stack)
        return {**abandon_data(tree, rt.keys.data_key), KEPT: await _attached(session, tree)}
