"""A stack's definition: its template bound to an environment and given values.

``build`` parses and validates everything (the templates it nests included) and answers
which resources are active and in what order they are made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from control.hot import taint
from control.hot.binding import condition_values, resolve_parameters
from control.hot.environment import Environment
from control.hot.errors import TemplateError
from control.hot.evaluation import evaluate_condition
from control.hot.nesting import Nesting
from control.hot.parameters import Parameters
from control.hot.parser import parse_template
from control.hot.template import Template


@dataclass(frozen=True)
class Definition:
    template: Template
    environment: Environment
    params: Parameters
    conditions: Mapping[str, bool]

    def active(self, name: str) -> bool:
        """False for a resource whose condition is false."""
        return self._truth(self.template.resources[name].condition, f"resources.{name}.condition")

    def output_active(self, name: str) -> bool:
        return self._truth(self.template.outputs[name].condition, f"outputs.{name}.condition")

    def _truth(self, cond: Any, path: str) -> bool:
        if cond is None:
            return True
        return evaluate_condition(cond, _Conditions(self), path)

    def order(self) -> list[str]:
        return list(self._order)

    @cached_property
    def _order(self) -> tuple[str, ...]:
        # Once per definition (it is immutable): its conditions evaluated for every resource.
        return tuple(n for n in self.template.order() if self.active(n))

    def requires(self, name: str) -> list[str]:
        return sorted(d for d in self.template.dependencies(name) if self.active(d))


class _Conditions:
    """What a resource's or output's `condition` may use: parameters and named conditions."""

    def __init__(self, defn: Definition) -> None:
        self._defn = defn

    def param(self, name: str) -> Any:
        return self._defn.params.values.get(name, "")

    def resource_id(self, name: str) -> Any:
        raise TemplateError(name, "a condition cannot refer to a resource")

    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        raise TemplateError(name, "a condition cannot refer to a resource")

    def file(self, path: str) -> str:
        raise TemplateError(path, "a condition cannot read a file")

    def condition(self, name: str) -> bool:
        return self._defn.conditions.get(name, False)

    def facade(self, key: str) -> Any:
        raise TemplateError(key, "a condition cannot use resource_facade")


def build(
    source: Mapping[str, Any],
    files: Mapping[str, str],
    environment: Environment,
    given: Mapping[str, Any],
    *,
    stack_name: str,
    stack_id: str,
    nesting: Nesting | None = None,
) -> Definition:
    """Parse and validate everything; raises TemplateError naming what is wrong."""
    template = parse_template(source, files=files, environment=environment, nesting=nesting)
    return bind(template, environment, given, stack_name=stack_name, stack_id=stack_id)


def bind(
    template: Template, environment: Environment, given: Mapping[str, Any], *, stack_name: str, stack_id: str
) -> Definition:
    """A parsed template with its parameter values and conditions (many stacks may share *template*)."""
    params = resolve_parameters(template, environment, given)
    conditions = condition_values(template, params, stack_name=stack_name, stack_id=stack_id)
    return Definition(template, environment, params, conditions)


#: JSON's scalars but numbers with a fraction (``is_plain``).
_SCALARS = frozenset({str, int, bool, type(None)})


def plain(value: Any, *, shared: bool = False) -> Any:
    """The JSON form of a resolved value, for storage and comparison; Secrets stay Secrets.
    *shared*: its equal parts one object (a request's template: read, never written into)."""
    return taint.loads(json.dumps(value, default=_stored), shared=shared)


def is_plain(value: Any) -> bool:
    """Whether *value* is its own JSON form already (``plain`` would return an equal copy): maps with
    text keys (none of them a stored Secret's MARK), lists, text, whole and finite numbers, true,
    false and null. A walk that allocates nothing but its stack, no deeper than the value nests."""
    todo = [value]
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is dict:
            if taint.MARK in node or not all(type(k) is str for k in node):
                return False
            todo.extend(node.values())
        elif kind is list:
            todo.extend(node)
        elif kind not in _SCALARS and not (kind is float and math.isfinite(node)):
            return False
    return True


def _stored(value: Any) -> Any:
    return taint.json_default(value) if isinstance(value, taint.Secret) else str(value)
