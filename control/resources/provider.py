"""Template resources (Heat's provider templates): a resource whose type is a template.

The resource's properties are the nested stack's parameters and its attributes are the
nested stack's outputs, ``OS::stack_id``, and ``resource.<name>[.<attribute>]`` for the
nested resources the parent reads: for each such path the parent's template reads
(``Nest.wants``), the nested template gets a hidden output (``anneal:["resource.x.y", ...]``)
computing it, so the value is evaluated inside the nested stack, as Heat does with the
outputs it adds to group templates.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from control import hot
from control.resources import nested
from control.resources.base import Outcome, Res, done
from control.store.orm import ResourceRow, StackRow
from control.txn import Txn

#: Output names the engine adds to a nested template start with this; `stack outputs` hides them.
HIDDEN = "anneal:"


def hidden_output(path: Iterable[Any]) -> str:
    """The name of the output that answers ``get_attr`` path *path* of a template resource."""
    return HIDDEN + json.dumps(list(path))


def read(attributes: Mapping[str, Any], name: str, path: list[Any]) -> Any:
    """``get_attr: [resource, name, *path]`` of a template resource."""
    if name.startswith("resource."):
        return attributes.get(hidden_output([name, *path]))
    return hot.select(attributes.get(name), path)


def _hidden_outputs(wants: frozenset[tuple[Any, ...]] | None, template: hot.Template) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(wants or (), key=json.dumps):
        if not (path and isinstance(path[0], str) and path[0].startswith("resource.")):
            continue
        parts = path[0].split(".", 2)
        if parts[1] not in template.resources:
            continue
        value = (
            {"get_attr": [parts[1], parts[2], *path[1:]]} if len(parts) > 2 else {"get_resource": parts[1]}
        )
        out[hidden_output(path)] = {"value": value}
    return out


def parts(res: Res, props: Mapping[str, Any]) -> dict[str, Any]:
    """What the nested stack of *res* is made from: template, files, environment, parameters
    (and the template's JSON text for digests: ``nested.TEMPLATE_TEXT``)."""
    assert res.nest is not None and res.nest.template is not None, "a template resource acts with its Nest"
    files = res.stack.files
    key, source = hot.load_nested(files, res.type, f"{res.where}.type")
    template, text = _child_template(source, res.nest.wants, res.nest.template)
    env = hot.child_environment(res.nest.environment, res.name)
    return {
        "template": template,
        nested.TEMPLATE_TEXT: text,
        "files": hot.child_files(files, [key], env),
        "environment": env,
        "params": {k: v for k, v in props.items() if v is not None},
    }


#: The nested templates ``_child_template`` built lately, the most recent last: by the identity of
#: their source and parsed template (both held in the value, so neither id is reused while kept).
_BUILT: OrderedDict[tuple[int, Any, int], tuple[Any, hot.Template, Any, nested.Dumped]] = OrderedDict()
#: How many ``_BUILT`` keeps (as many as nesting.READ_KEPT keeps sources).
BUILT_KEPT = 16


def _child_template(
    source: Mapping[str, Any], wants: frozenset[tuple[Any, ...]] | None, parsed: hot.Template
) -> tuple[Any, nested.Dumped]:
    """The nested template *source* with the hidden outputs its parent reads, in its stored form
    and as JSON text, shared by every member of a group: read them only.

    10,000 members built their own copy of one template, and dumped it twice for the
    digests: a fifth of the time their group spent creating or updating them.
    """
    key = (id(source), wants, id(parsed))
    found = _BUILT.get(key)
    if found is None:
        template = dict(source)
        template["outputs"] = {**dict(source.get("outputs") or {}), **_hidden_outputs(wants, parsed)}
        stored = hot.plain(template)
        found = _BUILT[key] = (source, parsed, stored, nested.dumped(stored))
        while len(_BUILT) > BUILT_KEPT:
            _BUILT.popitem(last=False)
    _BUILT.move_to_end(key)
    return found[2], found[3]


def _digest(res: Res, built: Mapping[str, Any]) -> str:
    env = hot.environment_to_json(built["environment"])
    template = nested.template_part(built)
    return nested.digest(template, built["files"], env, res.nest.facade if res.nest else {})


class TemplateResource:
    """A resource of a template type: one nested stack, updated in place, never replaced."""

    def parts(self, res: Res, props: Mapping[str, Any]) -> dict[str, Any]:
        """What the nested stack is made from (``parts``; OS::Heat::Stack reads its property)."""
        return parts(res, props)

    def started(self, txn: Txn, child: StackRow, props: Mapping[str, Any]) -> None:
        """The nested stack was given its definition (OS::Heat::Stack sets its timeout here)."""

    def attributes(self, child: nested.ChildState, outputs: Mapping[str, Any]) -> dict[str, Any]:
        """The resource's attributes once its nested stack is COMPLETE with these outputs."""
        return {**outputs, hot.STACK_ID: child.id}

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        built = self.parts(res, props)
        child = await nested.start_child(txn, res, built)
        self.started(txn, child, props)
        return Outcome("IN_PROGRESS", child.id, {nested.SOURCE: _digest(res, built)})

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        built = self.parts(res, props)
        child = await nested.get_child(txn, row.physical_id)
        if child is None:
            return await self.create(txn, res, props)
        await nested.update_child(txn, res, child, built)
        self.started(txn, child, props)
        return Outcome("IN_PROGRESS", child.id, {**row.attributes, nested.SOURCE: _digest(res, built)})

    def changed(self, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> bool:
        return (row.attributes or {}).get(nested.SOURCE) != _digest(res, self.parts(res, props))

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        child = await nested.get_child(txn, row.physical_id)
        if child is None:
            return done()
        await nested.delete_child(txn, child)
        return Outcome("IN_PROGRESS", child.id, row.attributes)

    async def check(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        child = await nested.child_state(txn, row.physical_id)
        attributes: dict[str, Any] = {}
        if child is not None and child.status == "COMPLETE":
            attributes = self.attributes(child, await nested.child_outputs(txn, child.id))
            attributes[nested.SOURCE] = (row.attributes or {}).get(nested.SOURCE)
        return nested.child_outcome(row, child, attributes)

    async def suspend(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return await nested.lifecycle(txn, row, "SUSPEND")

    async def resume(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return await nested.lifecycle(txn, row, "RESUME")
