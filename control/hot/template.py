"""HOT templates: parsing, complete static validation, and the resource dependency graph.

``parse_template`` either returns a Template that the engine can build without meeting a
structural problem, or raises TemplateError naming the first problem's path.
"""

from __future__ import annotations

import datetime
import heapq
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from control.hot.environment import Environment, map_type
from control.hot.errors import TemplateError, at
from control.hot.functions import (
    CONDITION_FUNCTIONS,
    CONDITION_ONLY,
    SINCE,
    call_of,
    check_shape,
    is_unsupported,
    references,
)
from control.hot.loader import check_document, load_yaml
from control.hot.parameters import PSEUDO_PARAMETERS, ParameterDef, parse_parameter_defs
from control.hot.types import ALIASES, TYPES, TypeSpec, check_keys, check_properties, describe

__all__ = ["OutputDef", "ParameterDef", "ResourceDef", "Template", "parse_template"]

_DATES = (
    "2013-05-23",
    "2014-10-16",
    "2015-04-30",
    "2015-10-15",
    "2016-04-08",
    "2016-10-14",
    "2017-02-24",
    "2017-09-01",
    "2018-03-02",
    "2018-08-31",
)
_NAMES = {
    "newton": "2016-10-14",
    "ocata": "2017-02-24",
    "pike": "2017-09-01",
    "queens": "2018-03-02",
    "rocky": "2018-08-31",
}
VERSIONS: Mapping[str, str] = {**{d: d for d in _DATES}, **_NAMES}
#: Conditions (the section, and the `condition` key of resources and outputs) came with newton.
CONDITIONS_SINCE = "2016-10-14"
SECTIONS = (
    "heat_template_version",
    "description",
    "parameter_groups",
    "parameters",
    "resources",
    "outputs",
    "conditions",
)
RESOURCE_KEYS = (
    "type",
    "properties",
    "metadata",
    "depends_on",
    "update_policy",
    "deletion_policy",
    "condition",
    "external_id",
)
DELETION_POLICIES = {"delete": "Delete", "retain": "Retain", "snapshot": "Snapshot"}
INFRASTRUCTURE = (
    "OS::Neutron::",
    "OS::Cinder::",
    "OS::Nova::",
    "OS::Glance::",
    "OS::Keystone::",
    "OS::Swift::",
    "OS::Octavia::",
    "OS::Designate::",
    "AWS::",
)
_RESOURCE_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class ResourceDef:
    name: str
    type: str  # after the environment's resource_registry
    original_type: str  # as written in the template
    properties: Mapping[str, Any]
    depends_on: tuple[str, ...]
    metadata: Mapping[str, Any]
    deletion_policy: str | None  # 'Delete' | 'Retain' | 'Snapshot'
    update_policy: Mapping[str, Any]
    condition: Any  # None, a boolean, a condition name or an inline condition


@dataclass(frozen=True)
class OutputDef:
    name: str
    value: Any
    description: str | None
    condition: Any


@dataclass(frozen=True)
class Template:
    version: str  # canonical date, e.g. '2018-08-31'
    description: str
    parameters: Mapping[str, ParameterDef]
    resources: Mapping[str, ResourceDef]
    outputs: Mapping[str, OutputDef]
    conditions: Mapping[str, Any]
    files: Mapping[str, str]
    warnings: tuple[str, ...]

    def dependencies(self, name: str) -> frozenset[str]:
        """Resources ``name`` needs first: depends_on plus get_resource/get_attr targets."""
        return self._graph[name]

    def order(self) -> list[str]:
        """A topological order of the resources; ties keep template order (parsing refused cycles)."""
        position = {name: i for i, name in enumerate(self.resources)}
        waiting = {name: 0 for name in self.resources}
        users: dict[str, list[str]] = {name: [] for name in self.resources}
        for name, deps in self._graph.items():
            for dep in deps & users.keys():
                users[dep].append(name)
                waiting[name] += 1
        ready = [position[name] for name, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        names, out = list(self.resources), []
        while ready:
            name = names[heapq.heappop(ready)]
            out.append(name)
            for user in users[name]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    heapq.heappush(ready, position[user])
        return out

    @cached_property
    def _graph(self) -> dict[str, frozenset[str]]:
        return {
            name: frozenset(r.depends_on) | references(r.properties) | references(r.metadata)
            for name, r in self.resources.items()
        }


def parse_template(
    source: str | Mapping[str, Any],
    *,
    files: Mapping[str, str] | None = None,
    environment: Environment | None = None,
    types: Mapping[str, TypeSpec] = TYPES,
) -> Template:
    """Parse and validate a HOT template; raises TemplateError at the first problem."""
    data = _document(source)
    version = _version(data.get("heat_template_version"))
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise TemplateError("description", f"expected a string, got {describe(description)}")
    warnings: list[str] = []
    parameters = parse_parameter_defs(data.get("parameters"), warnings)
    _check_groups(data.get("parameter_groups"), parameters)
    resources = _resources(data.get("resources"), environment or Environment(), types, warnings)
    template = Template(
        version=version,
        description=description,
        parameters=parameters,
        resources=resources,
        outputs=_outputs(data.get("outputs")),
        conditions=_names_map(data.get("conditions"), "conditions"),
        files=dict(files or {}),
        warnings=tuple(warnings),
    )
    _Checker(template, types).run()
    return template


def _document(source: Any) -> Mapping[str, Any]:
    if isinstance(source, str):
        data = load_yaml(source, "template")
    elif isinstance(source, Mapping):
        check_document(source, "template")
        data = source
    else:
        raise TemplateError("template", f"expected YAML text or a map, got {describe(source)}")
    if not isinstance(data, Mapping):
        raise TemplateError("template", f"expected a map of sections, got {describe(data)}")
    for key in data:
        if key in ("AWSTemplateFormatVersion", "HeatTemplateFormatVersion"):
            raise TemplateError(str(key), "CloudFormation-format templates are not supported; use HOT")
        if key not in SECTIONS:
            raise TemplateError(str(key), f"unknown section; allowed: {', '.join(SECTIONS)}")
    return data


def _version(raw: Any) -> str:
    if isinstance(raw, datetime.date):
        raw = raw.isoformat()
    accepted = ", ".join([*_DATES, *_NAMES])
    if raw is None:
        raise TemplateError("heat_template_version", f"is required; accepted: {accepted}")
    if not isinstance(raw, str) or raw not in VERSIONS:
        raise TemplateError("heat_template_version", f"{raw!r} is not supported; accepted: {accepted}")
    return VERSIONS[raw]


def _names_map(section: Any, path: str) -> dict[str, Any]:
    """A section that maps names to definitions, checked to be one."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise TemplateError(path, f"expected a map of name -> definition, got {describe(section)}")
    for name in section:
        if not isinstance(name, str) or not name:
            raise TemplateError(path, f"names must be non-empty strings, not {name!r}")
    return dict(section)


def _check_groups(groups: Any, parameters: Mapping[str, ParameterDef]) -> None:
    if groups is None:
        return
    if not isinstance(groups, list):
        raise TemplateError("parameter_groups", f"expected a list, got {describe(groups)}")
    seen: set[str] = set()
    for i, group in enumerate(groups):
        path = at("parameter_groups", i)
        if not isinstance(group, Mapping) or set(group) - {"label", "description", "parameters"}:
            raise TemplateError(path, "expected a map with label, description and parameters")
        names = group.get("parameters") or []
        if not isinstance(names, list):
            raise TemplateError(at(path, "parameters"), "expected a list of parameter names")
        for j, name in enumerate(names):
            if not isinstance(name, str) or name not in parameters:
                raise TemplateError(at(at(path, "parameters"), j), f"{name!r} is not a declared parameter")
            if name in seen:
                raise TemplateError(at(at(path, "parameters"), j), f"{name!r} is in more than one group")
            seen.add(name)


def _resources(
    section: Any, env: Environment, types: Mapping[str, TypeSpec], warnings: list[str]
) -> dict[str, ResourceDef]:
    return {
        name: _resource(name, body, env, types, warnings)
        for name, body in _names_map(section, "resources").items()
    }


def _mapping(body: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TemplateError(at(path, key), f"expected a map, got {describe(value)}")
    return dict(value)


def _resource(
    name: str, body: Any, env: Environment, types: Mapping[str, TypeSpec], warnings: list[str]
) -> ResourceDef:
    path = f"resources.{name}"
    if not _RESOURCE_NAME.fullmatch(name):
        raise TemplateError(path, "a resource name has only letters, digits, '_', '-' and '.'")
    if not isinstance(body, Mapping):
        raise TemplateError(path, f"expected a map with at least 'type', got {describe(body)}")
    for key in body:
        if key == "external_id":
            raise TemplateError(at(path, key), "external resources are not supported")
        if key not in RESOURCE_KEYS:
            raise TemplateError(at(path, key), f"unknown key; allowed: {', '.join(RESOURCE_KEYS[:-1])}")
    original = body.get("type")
    if not isinstance(original, str) or not original:
        raise TemplateError(at(path, "type"), "is required: the name of a resource type")
    rtype = map_type(env, original)
    rtype = ALIASES.get(rtype, rtype)
    if rtype not in types:
        raise _unsupported_type(at(path, "type"), original, rtype, types)
    properties = _mapping(body, "properties", path)
    check_properties(types[rtype], properties, at(path, "properties"), warnings)
    update_policy = _mapping(body, "update_policy", path)
    if types[rtype].update_policy is not None:
        check_keys(types[rtype].update_policy or {}, update_policy, at(path, "update_policy"))
    return ResourceDef(
        name=name,
        type=rtype,
        original_type=original,
        properties=properties,
        depends_on=_depends_on(body.get("depends_on"), at(path, "depends_on")),
        metadata=_mapping(body, "metadata", path),
        deletion_policy=_deletion_policy(body.get("deletion_policy"), at(path, "deletion_policy")),
        update_policy=update_policy,
        condition=body.get("condition"),
    )


def _unsupported_type(path: str, original: str, rtype: str, types: Mapping[str, TypeSpec]) -> TemplateError:
    mapped = f" (mapped from {original!r} by the environment)" if rtype != original else ""
    reason = f"type {rtype!r}{mapped} is not supported; supported types: {', '.join(sorted(types))}"
    if rtype.startswith(INFRASTRUCTURE):
        reason += (
            "; Anneal creates no infrastructure: to skip this resource, map its type in an "
            f'environment\'s resource_registry, e.g. resource_registry: {{"{rtype}": OS::Heat::None}}'
        )
    return TemplateError(path, reason)


def _depends_on(value: Any, path: str) -> tuple[str, ...]:
    names = [] if value is None else [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TemplateError(path, "expected a resource name or a list of resource names")
    return tuple(dict.fromkeys(names))


def _deletion_policy(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in DELETION_POLICIES:
        raise TemplateError(path, f"{value!r} is not one of Delete, Retain, Snapshot")
    return DELETION_POLICIES[value.lower()]


def _outputs(section: Any) -> dict[str, OutputDef]:
    outputs = {}
    for name, body in _names_map(section, "outputs").items():
        path = f"outputs.{name}"
        if not isinstance(body, Mapping) or "value" not in body:
            raise TemplateError(path, "expected a map with a value")
        for key in body:
            if key not in ("value", "description", "condition"):
                raise TemplateError(at(path, key), "unknown key; allowed: value, description, condition")
        description = body.get("description")
        if description is not None and not isinstance(description, str):
            raise TemplateError(at(path, "description"), f"expected a string, got {describe(description)}")
        outputs[name] = OutputDef(name, body["value"], description, body.get("condition"))
    return outputs


class _Checker:
    """One pass over every expression: functions, their arguments and their targets."""

    def __init__(self, template: Template, types: Mapping[str, TypeSpec]) -> None:
        self.t, self.types = template, types

    def run(self) -> None:
        if self.t.conditions:
            _check_version("the conditions section", CONDITIONS_SINCE, self.t.version, "conditions")
        for name, expr in self.t.conditions.items():
            self.visit(expr, f"conditions.{name}", in_condition=True, position=True)
        _raise_cycle(
            {n: list(_condition_refs(e)) for n, e in self.t.conditions.items()},
            "conditions",
            "condition cycle",
        )
        for name, r in self.t.resources.items():
            path = f"resources.{name}"
            for i, dep in enumerate(r.depends_on):
                if dep not in self.t.resources:
                    raise TemplateError(at(at(path, "depends_on"), i), f"resource {dep!r} is not defined")
            for key in ("properties", "metadata", "update_policy"):
                self.visit(getattr(r, key), at(path, key))
            if r.condition is not None:
                _check_version("condition", CONDITIONS_SINCE, self.t.version, at(path, "condition"))
                self.visit(r.condition, at(path, "condition"), in_condition=True, position=True)
        for name, o in self.t.outputs.items():
            self.visit(o.value, f"outputs.{name}.value")
            if o.condition is not None:
                _check_version("condition", CONDITIONS_SINCE, self.t.version, f"outputs.{name}.condition")
                self.visit(o.condition, f"outputs.{name}.condition", in_condition=True, position=True)
        graph = {name: self.t.dependencies(name) for name in self.t.resources}
        _raise_cycle(graph, "resources", "dependency cycle")

    def visit(self, node: Any, path: str, in_condition: bool = False, position: bool = False) -> None:
        """Check ``node``; ``position``: it is a condition; ``in_condition``: inside one."""
        call = call_of(node)
        if position and call is None:
            self._condition_leaf(node, path)
        elif call is not None:
            self._call(call[0], call[1], path, in_condition or position)
        elif isinstance(node, Mapping):
            if len(node) == 1 and is_unsupported(next(iter(node))):
                key = next(iter(node))
                scope = " (yaql is out of scope)" if key == "yaql" else ""
                raise TemplateError(path, f"function {key} is not supported{scope}")
            for key, value in node.items():
                self.visit(value, at(path, key), in_condition)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                self.visit(value, at(path, i), in_condition)

    def _condition_leaf(self, node: Any, path: str) -> None:
        if isinstance(node, str) and node not in self.t.conditions:
            raise TemplateError(path, f"condition {node!r} is not defined")
        if not isinstance(node, bool | str):
            allowed = ", ".join(sorted(CONDITION_FUNCTIONS))
            raise TemplateError(path, f"a condition is true, false, a condition name or a call of {allowed}")

    def _call(self, name: str, args: Any, path: str, in_condition: bool) -> None:
        _check_version(name, SINCE.get(name), self.t.version, path)
        if in_condition and name not in CONDITION_FUNCTIONS:
            allowed = ", ".join(sorted(CONDITION_FUNCTIONS))
            raise TemplateError(path, f"{name} cannot be used in a condition; use {allowed}")
        if not in_condition and name in CONDITION_ONLY:
            raise TemplateError(
                path,
                f"{name} is only allowed in conditions (the conditions section, a resource's or "
                "output's condition, the first argument of if)",
            )
        check_shape(name, args, path)
        inner = at(path, name)
        if name in ("not", "and", "or") and call_of(args) is None:
            for i, arg in enumerate(args if name != "not" else [args]):
                self.visit(arg, inner if name == "not" else at(inner, i), True, position=True)
            return
        if name == "if" and call_of(args) is None:
            self.visit(args[0], at(inner, 0), True, position=True)
            self.visit(args[1], at(inner, 1), in_condition)
            self.visit(args[2], at(inner, 2), in_condition)
            return
        if name in ("get_resource", "get_attr", "get_file") and call_of(args) is not None:
            # Dependencies and files must be known before anything is evaluated.
            raise TemplateError(path, f"{name}: the arguments must be written out, not computed")
        if name in ("get_param", "get_resource", "get_attr", "get_file"):
            getattr(self, f"_{name}")(args, path)
        self.visit(args, inner, in_condition)

    def _get_param(self, args: Any, path: str) -> None:
        if call_of(args) is not None:
            return
        name = args if isinstance(args, str) else args[0]
        if call_of(name) is None and not isinstance(name, str):
            raise TemplateError(path, "get_param: the parameter name must be a string")
        if isinstance(name, str) and name not in self.t.parameters and name not in PSEUDO_PARAMETERS:
            raise TemplateError(path, f"get_param: parameter {name!r} is not declared")

    def _get_resource(self, args: Any, path: str) -> None:
        if args not in self.t.resources:
            raise TemplateError(path, f"get_resource: resource {args!r} is not defined")

    def _get_attr(self, args: Any, path: str) -> None:
        target, attribute = args[0], args[1]
        if not isinstance(target, str):
            raise TemplateError(path, "get_attr: the resource name must be a string")
        if target not in self.t.resources:
            raise TemplateError(path, f"get_attr: resource {target!r} is not defined")
        if call_of(attribute) is not None:
            return
        if not isinstance(attribute, str):
            raise TemplateError(path, "get_attr: the attribute name must be a string")
        rtype = self.t.resources[target].type
        known = self.types[rtype].attributes
        if known is not None and attribute not in known:
            raise TemplateError(
                path,
                f"get_attr: {target} ({rtype}) has no attribute {attribute!r}; "
                f"it has: {', '.join(sorted(known))}",
            )

    def _get_file(self, args: Any, path: str) -> None:
        if args not in self.t.files:
            raise TemplateError(path, f"get_file: file {args!r} was not provided")


def _check_version(what: str, since: str | None, version: str, path: str) -> None:
    """Refuse *what* (a function, section or key) in a template older than the version that brought it."""
    if since is not None and version < since:
        release = {date: name for name, date in _NAMES.items()}
        named = f"{since} ({release[since]})" if since in release else since
        raise TemplateError(
            path, f"{what} needs heat_template_version {named} or later; this template is {version}"
        )


def _condition_refs(expr: Any) -> Iterable[str]:
    """Names of other conditions that a condition expression refers to."""
    if isinstance(expr, str):
        yield expr
        return
    call = call_of(expr)
    if call is not None and call[0] in ("not", "and", "or"):
        for arg in call[1] if isinstance(call[1], list) else [call[1]]:
            yield from _condition_refs(arg)


def _raise_cycle(graph: Mapping[str, Iterable[str]], path: str, what: str) -> None:
    """Raise TemplateError(path, 'what: a -> b -> a') when the graph has a cycle."""
    position = {name: i for i, name in enumerate(graph)}
    edges = {
        n: sorted((d for d in deps if d in position), key=position.__getitem__) for n, deps in graph.items()
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for root in graph:
        if root in state:
            continue
        trail, stack = [root], [iter(edges[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[trail.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                loop = [*trail[trail.index(nxt) :], nxt]
                raise TemplateError(path, f"{what}: {' -> '.join(loop)}")
            elif nxt not in state:
                state[nxt] = 1
                trail.append(nxt)
                stack.append(iter(edges[nxt]))
