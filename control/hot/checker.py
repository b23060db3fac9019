"""The static check of a parsed template: every expression's functions, arguments and targets.

It also refuses dependency and condition cycles, and functions or sections newer than the
template's heat_template_version. Evaluation can then rely on what it was checked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from control.hot import cfn, yaqlfn
from control.hot.errors import TemplateError, at
from control.hot.files import lookup
from control.hot.functions import (
    CONDITION_FUNCTIONS,
    CONDITION_ONLY,
    SINCE,
    call_of,
    check_shape,
    is_unsupported,
)
from control.hot.heatstack import check_outputs_attribute
from control.hot.nesting import check_attribute
from control.hot.parameters import PSEUDO_PARAMETERS
from control.hot.schema import TypeSpec
from control.hot.template import Template
from control.hot.versions import CONDITIONS_SINCE, NULLABLE_IF_SINCE, check_version


class Checker:
    """One pass over every expression: functions, their arguments and their targets."""

    def __init__(self, template: Template, types: Mapping[str, TypeSpec]) -> None:
        self.t, self.types = template, types

    def run(self) -> None:
        if self.t.conditions:
            check_version("the conditions section", CONDITIONS_SINCE, self.t.version, "conditions")
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
            for key in ("properties", "metadata", "update_policy", "external_id"):
                self.visit(getattr(r, key), at(path, key))
            if r.condition is not None:
                check_version("condition", CONDITIONS_SINCE, self.t.version, at(path, "condition"))
                self.visit(r.condition, at(path, "condition"), in_condition=True, position=True)
        for name, o in self.t.outputs.items():
            self.visit(o.value, f"outputs.{name}.value")
            if o.condition is not None:
                check_version("condition", CONDITIONS_SINCE, self.t.version, f"outputs.{name}.condition")
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
                raise TemplateError(
                    path, cfn.removed(key, self.t.version) or f"function {key} is not supported"
                )
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
        check_version(name, SINCE.get(name), self.t.version, path)
        if (name in cfn.UNTIL or name in cfn.CFN_ONLY) and cfn.removed(name, self.t.version):
            raise TemplateError(path, str(cfn.removed(name, self.t.version)))
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
        if name == "if" and isinstance(args, list) and len(args) == 2:
            check_version("if with two arguments", NULLABLE_IF_SINCE, self.t.version, path)
        if name == "yaql" and isinstance(args, Mapping) and call_of(args.get("expression")) is None:
            yaqlfn.parse(args.get("expression"), at(at(path, name), "expression"))
        inner = at(path, name)
        if name in ("not", "and", "or") and call_of(args) is None:
            for i, arg in enumerate(args if name != "not" else [args]):
                self.visit(arg, inner if name == "not" else at(inner, i), True, position=True)
            return
        if name == "if" and call_of(args) is None:
            self.visit(args[0], at(inner, 0), True, position=True)
            for i in range(1, len(args)):
                self.visit(args[i], at(inner, i), in_condition)
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
        rdef = self.t.resources[target]
        if rdef.nested is not None:
            check_attribute(rdef.nested, rdef.type, attribute, path)
            return
        if rdef.stack_outputs is not None:
            check_outputs_attribute(rdef.type, rdef.stack_outputs, attribute, path)
        rtype = rdef.type
        spec = self.types[rtype]
        known = spec.attributes
        if known is not None and attribute not in known and not attribute.startswith(spec.attribute_prefixes):
            raise TemplateError(
                path,
                f"get_attr: {target} ({rtype}) has no attribute {attribute!r}; "
                f"it has: {', '.join(sorted(known))}",
            )

    def _get_file(self, args: Any, path: str) -> None:
        if lookup(self.t.files, args) is None:
            raise TemplateError(path, f"get_file: file {args!r} was not provided")


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
