"""Heat's update preview: what an update would add, delete, replace, update in place or leave alone.

Nothing is written. Each resource's new properties are resolved against the stack's
current resources, as the engine would at the start of the update; a property that
reads an attribute of a resource the update replaces shows the old value, so such a
change may show up only once the update runs (Heat's preview has the same limit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control import hot
from control.engine import stackdef
from control.resources import DEPLOYMENT_TYPES
from control.resources.validate import check_definition
from control.runtime import Runtime
from control.services.stack_request import check_options, parse_request
from control.services.stack_resources import current_resources, identified_stack
from control.services.stacks import merged_request
from control.store.orm import ResourceRow

CATEGORIES = ("added", "deleted", "replaced", "updated", "unchanged")
#: Properties whose change makes a deployment a new one (control/resources/software.py revise).
_DEPLOYMENT_REPLACES = ("server", "signal_transport", "name")


async def preview_update(
    rt: Runtime, stack_name: str, stack_id: str, body: Mapping[str, Any]
) -> dict[str, list[Any]]:
    """Each of Heat's categories with the resources (``{name, type, row}``) that would fall in it."""
    existing = bool(body.get("existing"))
    given = parse_request(body, rt.settings.max_template_bytes, template_optional=existing)
    check_options(body)
    async with rt.sessions() as session:
        stack = await identified_stack(session, stack_name, stack_id)
        req = merged_request(stack, body, given)
        defn = stackdef.build(
            req.template, req.files, req.environment, req.parameters, stack_name=stack.name, stack_id=stack.id
        )
        check_definition(defn.template)
        rows = {r.name: r for r in await current_resources(session, stack.id)}
    found: dict[str, list[Any]] = {c: [] for c in CATEGORIES}
    ctx = stackdef.StackContext(stack, defn, rows)
    for name in defn.order():
        rdef = defn.template.resources[name]
        row = rows.get(name)
        found[_category(ctx, name, rdef, row)].append({"name": name, "type": rdef.type, "row": row})
    for name, row in rows.items():
        if name not in defn.order():
            found["deleted"].append({"name": name, "type": row.type, "row": row})
    return found


def _category(ctx: stackdef.StackContext, name: str, rdef: hot.ResourceDef, row: ResourceRow | None) -> str:
    if row is None:
        return "added"
    if row.type != rdef.type or row.status == "FAILED":
        return "replaced"
    try:
        props = stackdef.plain(hot.resolve(rdef.properties, ctx, f"resources.{name}.properties"))
    except hot.TemplateError:
        return "updated"  # it reads something only the update makes: it changes
    spec = hot.TYPES.get(rdef.type)
    if spec is not None and isinstance(props, dict):
        props = stackdef.plain(hot.apply_defaults(spec, props))
    old = row.properties or {}
    if props == old:
        return "unchanged"
    changed = (
        {k for k in set(props) | set(old) if props.get(k) != old.get(k)} if isinstance(props, dict) else set()
    )
    return "replaced" if _replaces(rdef.type, spec, changed) else "updated"


def _replaces(type_name: str, spec: hot.TypeSpec | None, changed: set[str]) -> bool:
    """Whether changing these properties makes a new resource rather than updating it in place."""
    if type_name in DEPLOYMENT_TYPES:
        return bool(changed & set(_DEPLOYMENT_REPLACES))
    if spec is None:
        return False
    return any(spec.properties.get(k) is None or spec.properties[k].update == "replace" for k in changed)
