"""Checks that need to know what resource types do: they live in control/hot/stackcheck.py.

There, `anneal template validate` runs them offline through the same function. The dry run
(``dry_run``) evaluates a stack as the engine will, its nested stacks included, before
anything is stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent import wire_files
from control import hot
from control.errors import BadRequestError
from control.hot.budget import Budget, BudgetError, current
from control.hot.errors import TemplateError, at
from control.hot.groups import AUTO_SCALING_GROUP, MEMBER_PROPERTY, substituted
from control.hot.nesting import parse_nested
from control.resources import secrecy
from control.resources.servers import server_name

GROUPS = frozenset({"OS::Heat::SoftwareDeploymentGroup", "OS::Heat::StructuredDeploymentGroup"})
SERVERS = hot.SERVER_TYPES
#: What get_resource gives in a dry run: as long as the id it stands for.
PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000"
#: Calls whose value a dry run does not know: what resources give, and a parent's facade.
UNKNOWN = frozenset({"get_attr", "get_resource", "resource_facade"})
#: Stands for the random part of a nested stack's name (nested.short_id) in a dry run.
SHORT_ID = "x" * 12
#: A group's members dry-run at most: those whose definition differs (docs/templates.md).
MAX_DRY_MEMBERS = 8
#: Members looked at for a definition that differs: the first ones and the last.
SCAN_MEMBERS = 1000


def check_definition(template: hot.Template) -> list[str]:
    """Raise hot.TemplateError for what would fail later (an unsupported transport); the warnings."""
    return hot.check_types(template)


class DryContext:
    """What functions see in a dry run: parameters, files and conditions; resources are not made yet.

    *placeholders* names the parameters whose value is not known yet (a nested stack given
    a resource's attribute): they read as None.
    """

    def __init__(
        self,
        values: Mapping[str, Any],
        conditions: Mapping[str, bool],
        files: Mapping[str, Any],
        placeholders: frozenset[str] = frozenset(),
    ) -> None:
        self._values, self._conditions, self._files = values, conditions, files
        self.placeholders = placeholders

    def param(self, name: str) -> Any:
        return self._values[name]

    def resource_id(self, name: str) -> Any:
        return PLACEHOLDER_ID

    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        return None

    def file(self, path: str) -> Any:
        key = hot.lookup_file(self._files, path)
        value = self._files.get(key, "") if key is not None else ""
        if isinstance(value, Mapping) and list(value) == [wire_files.DIRECTORY_KEY]:
            return dict(value[wire_files.DIRECTORY_KEY])
        return value

    def facade(self, key: str) -> Any:
        return None  # a placeholder, as for attributes: the engine reads the parent's facade

    def condition(self, name: str) -> bool:
        return self._conditions.get(name, False)

    def known(self, raw: Any, value: Any) -> bool:
        """Whether *value*, evaluated from *raw*, is what the engine will compute (no placeholder in it)."""
        if _holds_none(value):
            return False
        for _, fn, args in hot.calls(raw):
            if fn in UNKNOWN:
                return False
            if fn == "get_param" and self.placeholders:
                name = args[0] if isinstance(args, list) and args else args
                if not isinstance(name, str) or name in self.placeholders:
                    return False
        return True


def _holds_none(value: Any) -> bool:
    if isinstance(value, hot.Secret):
        return _holds_none(value.value)
    if isinstance(value, Mapping):
        return any(_holds_none(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_none(v) for v in value)
    return value is None


@dataclass(frozen=True)
class DryStack:
    """A stack being dry-run: its template, what its functions see, and where it sits."""

    template: hot.Template
    ctx: DryContext
    env: hot.Environment
    files: Mapping[str, Any]
    name: str
    nesting: hot.Nesting


def dry_run(stack: DryStack, resources: Iterable[str], outputs: Iterable[str]) -> None:
    """Evaluate each resource's properties and each output once, as the engine will, the nested
    stacks' too, and check server names. What resources give is a placeholder, so a call's other
    errors are left to the engine; what the calls build is charged to the current budget
    (BudgetError names the call)."""
    budget = current()
    with budget.leniently():
        for name in resources:
            _dry_resource(stack, name, budget)
        for name in outputs:
            hot.resolve(stack.template.outputs[name].value, stack.ctx, f"outputs.{name}.value")


def _dry_resource(stack: DryStack, name: str, budget: Budget) -> None:
    rdef, path = stack.template.resources[name], f"resources.{name}.properties"
    props = hot.resolve(rdef.properties, stack.ctx, path)
    props = props if isinstance(props, Mapping) else {}
    if rdef.type in SERVERS:  # a hidden value is refused as a name, as the engine refuses it
        secrecy.check_carriers(rdef.type, props, path)
        server_name(stack.name, name, props)
    servers = props.get("servers") if rdef.type in GROUPS else None
    if isinstance(servers, Mapping) and len(servers) > 1:  # each member stores the properties
        shared = budget.size({k: v for k, v in props.items() if k != "servers"})
        budget.spend((len(servers) - 1) * shared, f"{path}.servers", "the group's members")
    if rdef.nested is not None:
        given = _given(stack.ctx, rdef.properties, props)
        child = Nested(rdef.type, rdef.nested, hot.child_environment(stack.env, name), stack.nesting.deeper())
        _dry_nested(stack, child, f"{stack.name}-{name}-{SHORT_ID}", given, f"resources.{name}")
    elif rdef.type in MEMBER_PROPERTY:
        _dry_members(stack, name, rdef, props, budget)


def _given(ctx: DryContext, raw: Any, props: Mapping[str, Any]) -> dict[str, Any | None]:
    """The nested stack's parameters: each value the dry run knows, None for one it does not."""
    raw = raw if isinstance(raw, Mapping) else {}
    given: dict[str, Any | None] = {k: None for k, v in raw.items() if v is not None}
    for key, value in props.items():
        if value is not None and ctx.known(raw.get(key, raw), value):
            given[key] = value
    return given


@dataclass(frozen=True)
class Nested:
    """A nested stack's template (its key in the files), its environment and its place."""

    key: str
    template: hot.Template
    env: hot.Environment
    nesting: hot.Nesting


def _dry_nested(
    parent: DryStack, child: Nested, name: str, given: Mapping[str, Any | None], where: str
) -> None:
    """Dry-run the nested stack *child* given *given* (None: not known yet), errors at *where*."""
    known = {k: v for k, v in given.items() if v is not None}
    unknown = frozenset(k for k, v in given.items() if v is None)
    try:
        params = hot.resolve_parameters(child.template, child.env, known, placeholders=unknown)
    except TemplateError as e:  # the value this resource gives a parameter: its property's path
        pname = e.path.removeprefix("parameters.")
        raise TemplateError(f"{where}.properties.{pname}", f"template {child.key}: {e.reason}") from None
    try:
        # a condition over a value not known yet may turn out true: what it guards is checked too
        undecided = frozenset(n for n in child.template.conditions if _reads(child, n, unknown))
        conditions = hot.condition_values(
            child.template, params, stack_name=name, stack_id=PLACEHOLDER_ID, undecided=undecided
        )
        defn = hot.Definition(child.template, child.env, params, conditions)
        order = [n for n in child.template.order() if _possible(defn, unknown, "resources", n)]
        outputs = [n for n in child.template.outputs if _possible(defn, unknown, "outputs", n)]
    except TemplateError as e:
        raise _inside(where, child.key, e) from None
    pseudo = {"OS::stack_name": name, "OS::stack_id": PLACEHOLDER_ID, "OS::project_id": ""}
    values = {
        k: hot.Secret(v) if k in params.hidden and v is not None else v for k, v in params.values.items()
    }
    ctx = DryContext({**values, **pseudo}, conditions, parent.files, unknown)
    stack = DryStack(child.template, ctx, child.env, parent.files, name, child.nesting)
    try:
        dry_run(stack, order, outputs)
    except TemplateError as e:
        raise _inside(where, child.key, e) from None
    except BadRequestError as e:
        raise TemplateError(where, f"in template {child.key}: {e.where}: {e.message}") from None


def _reads(child: Nested, condition: str, unknown: frozenset[str]) -> bool:
    return hot.reads_parameters(child.template.conditions[condition], child.template, unknown)


def _possible(defn: hot.Definition, unknown: frozenset[str], section: str, name: str) -> bool:
    """Whether the resource or output may be active: its condition is true, or reads a value not known yet."""
    entry = (defn.template.resources if section == "resources" else defn.template.outputs)[name]
    if entry.condition is None or hot.reads_parameters(entry.condition, defn.template, unknown):
        return True
    return defn.active(name) if section == "resources" else defn.output_active(name)


def _inside(where: str, key: str, e: TemplateError) -> TemplateError:
    """The error *e* of nested template *key*, at the resource that nests it (a budget's stays one)."""
    return (BudgetError if isinstance(e, BudgetError) else TemplateError)(where, f"in template {key}: {e}")


def _dry_members(
    stack: DryStack, name: str, rdef: hot.ResourceDef, props: Mapping[str, Any], budget: Budget
) -> None:
    """Dry-run each member whose definition differs (its nested template's too; at most
    MAX_DRY_MEMBERS); the others are charged as the costliest of them."""
    key = MEMBER_PROPERTY[rdef.type]
    member, count = props.get(key), _count(rdef.type, props)
    if not isinstance(member, Mapping) or not isinstance(member.get("type"), str) or count == 0:
        return
    group = Group(stack, name, rdef, member, props.get("index_var"))
    costs = []
    for index in group.distinct(count):
        started = budget.used
        group.dry_run(index)
        costs.append(budget.used - started)
    if count is not None and count > 1:
        # each other member stores its definition, and builds what the costliest one dry-run built
        cost = (count - 1) * budget.size(member) + (count - len(costs)) * max(costs)
        budget.spend(cost, group.where, "the group's members")


class Group:
    """A group's member definition as each member gets it: its index in its properties, and the
    environment's entries for its name."""

    def __init__(
        self, stack: DryStack, name: str, rdef: hot.ResourceDef, member: Mapping[str, Any], index_var: Any
    ) -> None:
        self.stack, self.name, self.rdef, self.member = stack, name, rdef, member
        self.key = MEMBER_PROPERTY[rdef.type]
        self.where = f"resources.{name}.properties.{self.key}"
        self.var = index_var if isinstance(index_var, str) else "%index%"
        self.env = hot.child_environment(stack.env, name)

    def distinct(self, count: int | None) -> list[int]:
        """Member indices whose definitions differ: the first, the last, then in order, at most
        MAX_DRY_MEMBERS of them, among the first SCAN_MEMBERS (scaling groups' members differ in nothing)."""
        props = self.member.get("properties") or {}
        varies = self.rdef.type != AUTO_SCALING_GROUP and substituted(props, self.var, "0") != substituted(
            props, self.var, "1"
        )
        if not varies and not self.env.resources:
            return [0]
        last = [count - 1] if count is not None else []  # a count known only later: the first ones
        order = dict.fromkeys([0, *last, *range(1, min(count or SCAN_MEMBERS, SCAN_MEMBERS))])
        seen, picked = set(), []
        for index in order:
            rendering = json.dumps(
                [
                    substituted(props, self.var, str(index)) if varies else None,
                    hot.map_type(self.env, self.member["type"], str(index)),
                    hot.child_environment(self.env, str(index)).resources,
                ],
                sort_keys=True,
                default=str,
            )
            if rendering not in seen:
                seen.add(rendering)
                picked.append(index)
                if len(picked) == MAX_DRY_MEMBERS:
                    break
        return picked

    def dry_run(self, index: int) -> None:
        """Member *index*'s nested stack dry-run, when its type is a template."""
        stack, member = self.stack, str(index)
        mprops = substituted(self.member.get("properties") or {}, self.var, member)
        mapped = hot.map_type(self.env, self.member["type"], member)
        if not isinstance(mprops, Mapping) or not hot.is_template_ref(mapped, stack.files):
            return
        nesting = stack.nesting.deeper()
        where = self.where
        tkey, template = parse_nested(
            member, mapped, at(where, "type"), stack.files, self.env, nesting, _parse
        )
        raw = self.rdef.properties.get(self.key)
        raw_props = raw.get("properties", raw) if isinstance(raw, Mapping) else raw
        child = Nested(tkey, template, hot.child_environment(self.env, member), nesting.deeper())
        group_name = f"{stack.name}-{self.name}-{SHORT_ID}"
        given = _given(stack.ctx, raw_props, mprops)
        _dry_nested(stack, child, f"{group_name}-{member}-{SHORT_ID}", given, where)


def _count(rtype: str, props: Mapping[str, Any]) -> int | None:
    """How many members the group starts with, when the dry run knows."""
    value = props.get("count", 1) if rtype != AUTO_SCALING_GROUP else props.get("desired_capacity")
    if rtype == AUTO_SCALING_GROUP and value is None:
        value = props.get("min_size")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _parse(source: Any, files: Mapping[str, str], env: hot.Environment, nesting: hot.Nesting) -> hot.Template:
    return hot.parse_template(source, files=files, environment=env, nesting=nesting)
