"""A template bound to its environment and given values: final parameter values, condition values."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from control.hot import taint
from control.hot.environment import Environment
from control.hot.errors import TemplateError
from control.hot.evaluation import evaluate_condition
from control.hot.functions import call_of, walk
from control.hot.parameters import Parameters, check_constraints, convert
from control.hot.template import Template

MAX_CONDITION_DEPTH = 50


def resolve_parameters(
    template: Template,
    environment: Environment,
    given: Mapping[str, Any],
    placeholders: frozenset[str] = frozenset(),
) -> Parameters:
    """Final parameter values: given > environment parameters > parameter_defaults > default.

    A dry run names in *placeholders* the parameters its parent gives values not known yet
    (a resource's attribute): they get None, unchecked.
    """
    for source in (given, environment.parameters):
        for name in source:
            if name not in template.parameters:
                raise TemplateError(f"parameters.{name}", "not declared by the template")
    values: dict[str, Any] = {}
    # A value given as a Secret (a parent stack passing a hidden value to a nested one) makes
    # its parameter hidden here too: it is checked as plain data, and stays secret when read.
    secret = {n for n in template.parameters if taint.tainted(given.get(n))}
    for name, pdef in template.parameters.items():
        path = f"parameters.{name}"
        if name in placeholders and name not in given:
            values[name] = None
            continue
        raw = next(
            (
                s[name]
                for s in (given, environment.parameters, environment.parameter_defaults)
                if s.get(name) is not None
            ),
            pdef.default,
        )
        if raw is None:
            raise TemplateError(path, "no value given and no default")
        # A secret-given value's messages never show it.
        checked = dataclasses.replace(pdef, hidden=True) if name in secret else pdef
        values[name] = convert(checked.type, taint.reveal(raw), path, checked.hidden)
        check_constraints(checked, values[name], path)
    unused = sorted(str(n) for n in environment.parameter_defaults if n not in template.parameters)
    warnings = [f"parameter_defaults: not declared by the template, ignored: {', '.join(unused)}"]
    return Parameters(
        values=values,
        hidden=frozenset(n for n, p in template.parameters.items() if p.hidden or n in secret),
        warnings=tuple(warnings if unused else ()),
    )


class _ConditionContext:
    """Evaluates the conditions section; conditions may use parameters, never resources."""

    def __init__(self, template: Template, values: Mapping[str, Any]) -> None:
        self._template, self._values = template, values
        self._done: dict[str, bool] = {}
        self._active: list[str] = []

    def param(self, name: str) -> Any:
        if name not in self._values:
            raise TemplateError("conditions", f"get_param: parameter {name!r} is not declared")
        return self._values[name]

    def resource_id(self, name: str) -> Any:
        raise TemplateError("conditions", "conditions cannot refer to resources")

    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        raise TemplateError("conditions", "conditions cannot refer to resources")

    def file(self, path: str) -> str:
        raise TemplateError("conditions", "conditions cannot read files")

    def facade(self, key: str) -> Any:
        raise TemplateError("conditions", "conditions cannot use resource_facade")

    def assume(self, names: frozenset[str]) -> None:
        """Take the conditions *names* as true without evaluating them."""
        self._done.update(dict.fromkeys(names & set(self._template.conditions), True))

    def condition(self, name: str) -> bool:
        if name in self._done:
            return self._done[name]
        if name not in self._template.conditions:
            raise TemplateError("conditions", f"condition {name!r} is not defined")
        if name in self._active or len(self._active) > MAX_CONDITION_DEPTH:
            loop = " -> ".join([*self._active, name])
            raise TemplateError("conditions", f"conditions refer to each other too deeply: {loop}")
        self._active.append(name)
        try:
            value = evaluate_condition(self._template.conditions[name], self, f"conditions.{name}")
        finally:
            self._active.pop()
        self._done[name] = value
        return value


def condition_values(
    template: Template,
    params: Parameters,
    *,
    stack_name: str = "",
    stack_id: str = "",
    project_id: str = "",
    undecided: frozenset[str] = frozenset(),
) -> dict[str, bool]:
    """The truth of every entry of the template's conditions section; those named in
    *undecided* (a dry run's, over values not known yet) are true, not evaluated."""
    pseudo = {"OS::stack_name": stack_name, "OS::stack_id": stack_id, "OS::project_id": project_id}
    ctx = _ConditionContext(template, {**params.values, **pseudo})
    ctx.assume(undecided)
    return {name: ctx.condition(name) for name in template.conditions}


def reads_parameters(expr: Any, template: Template, names: frozenset[str]) -> bool:
    """Whether the condition *expr* reads any parameter in *names*, itself or through the named
    conditions it uses (a parameter named by a computed value counts as read)."""
    pending, seen = [expr], set()
    while pending:
        for _, node in walk(pending.pop()):
            if isinstance(node, str) and node in template.conditions and node not in seen:
                seen.add(node)
                pending.append(template.conditions[node])
            call = call_of(node)
            if call is not None and call[0] == "get_param":
                name = call[1][0] if isinstance(call[1], list) and call[1] else call[1]
                if not isinstance(name, str) or name in names:
                    return True
    return False
