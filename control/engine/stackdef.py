"""A stack's parsed definition: template, environment and parameters, from its row."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import defer

from agent import wire_files
from control import hot
from control.hot import taint
from control.store.orm import StackRow

#: The stack row's big columns a Definition is parsed from (plus the one a rollback returns
#: to); ``files`` is not among them: expressions read it while resources act (``get_file``).
DEFINITION_COLUMNS = ("template", "environment", "params_given", "previous")
#: An attribute that stands for the resource in get_resource (an AWS wait handle's signed URL).
REFERENCE = "anneal:ref"


def without(*columns: str) -> list[Any]:
    """Loader options: the stack row without *columns* (decrypted and decoded only when read;
    reading one raises, it does not query). At 50,000 deployments the template alone decodes
    to 150 MB of Python objects."""
    return [defer(getattr(StackRow, name), raiseload=True) for name in columns]


@dataclass(frozen=True)
class Definition:
    template: hot.Template
    environment: hot.Environment
    params: hot.Parameters
    conditions: Mapping[str, bool]

    def active(self, name: str) -> bool:
        """False for a resource whose condition is false."""
        return self._truth(self.template.resources[name].condition, f"resources.{name}.condition")

    def output_active(self, name: str) -> bool:
        return self._truth(self.template.outputs[name].condition, f"outputs.{name}.condition")

    def _truth(self, cond: Any, path: str) -> bool:
        if cond is None:
            return True
        return hot.evaluate_condition(cond, _Conditions(self), path)

    def order(self) -> list[str]:
        return [n for n in self.template.order() if self.active(n)]

    def requires(self, name: str) -> list[str]:
        return sorted(d for d in self.template.dependencies(name) if self.active(d))


class _Conditions:
    """What a resource's or output's `condition` may use: parameters and named conditions."""

    def __init__(self, defn: Definition) -> None:
        self._defn = defn

    def param(self, name: str) -> Any:
        return self._defn.params.values.get(name, "")

    def resource_id(self, name: str) -> Any:
        raise hot.TemplateError(name, "a condition cannot refer to a resource")

    def attribute(self, name: str, attribute: str) -> Any:
        raise hot.TemplateError(name, "a condition cannot refer to a resource")

    def file(self, path: str) -> str:
        raise hot.TemplateError(path, "a condition cannot read a file")

    def condition(self, name: str) -> bool:
        return self._defn.conditions.get(name, False)


class ResourceView(Protocol):
    """What expressions read of another resource: a full row, or the engine's light record of one."""

    @property
    def physical_id(self) -> str | None: ...

    @property
    def attributes(self) -> Mapping[str, Any]: ...


class StackContext:
    """What intrinsic functions see in a stack: its parameters, resources and files."""

    def __init__(self, stack: StackRow, defn: Definition, rows: Mapping[str, ResourceView]) -> None:
        self._stack, self._defn, self._rows = stack, defn, rows

    def param(self, name: str) -> Any:
        pseudo = {"OS::stack_name": self._stack.name, "OS::stack_id": self._stack.id, "OS::project_id": ""}
        if name in pseudo:
            return pseudo[name]
        value = self._defn.params.values[name]
        return taint.Secret(value) if name in self._defn.params.hidden else value

    def resource_id(self, name: str) -> Any:
        """What get_resource gives: the physical id, or the reference a handler set (a URL)."""
        row = self._rows.get(name)
        return (row.attributes.get(REFERENCE) or row.physical_id) if row is not None else None

    def attribute(self, name: str, attribute: str) -> Any:
        row = self._rows.get(name)
        return row.attributes.get(attribute) if row is not None else None

    def file(self, path: str) -> Any:
        """A get_file: the file's text, its binary envelope, or a directory's map of those."""
        value = self._stack.files[path]
        if isinstance(value, Mapping) and list(value) == [wire_files.DIRECTORY_KEY]:
            return dict(value[wire_files.DIRECTORY_KEY])
        return value

    def condition(self, name: str) -> bool:
        return self._defn.conditions.get(name, False)


def environment_to_json(env: hot.Environment) -> dict[str, Any]:
    return {
        "parameters": dict(env.parameters),
        "parameter_defaults": dict(env.parameter_defaults),
        "resource_registry": dict(env.resource_registry),
    }


def environment_from_json(obj: Mapping[str, Any]) -> hot.Environment:
    return hot.Environment(
        parameters=dict(obj.get("parameters") or {}),
        parameter_defaults=dict(obj.get("parameter_defaults") or {}),
        resource_registry=dict(obj.get("resource_registry") or {}),
    )


def build(
    source: Mapping[str, Any],
    files: Mapping[str, Any],
    environment: hot.Environment,
    given: Mapping[str, Any],
    *,
    stack_name: str,
    stack_id: str,
) -> Definition:
    """Parse and validate everything; raises hot.TemplateError naming what is wrong."""
    template = hot.parse_template(source, files=files, environment=environment)
    params = hot.resolve_parameters(template, environment, given)
    conditions = hot.condition_values(template, params, stack_name=stack_name, stack_id=stack_id)
    return Definition(template, environment, params, conditions)


class Definitions:
    """Parsed definitions cached per stack version."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int], Definition] = {}

    def get(self, stack: StackRow) -> Definition:
        key = (stack.id, stack.version)
        found = self._cache.get(key)
        if found is None:
            found = build(
                stack.template,
                stack.files,
                environment_from_json(stack.environment),
                stack.params_given,
                stack_name=stack.name,
                stack_id=stack.id,
            )
            self._cache = {k: v for k, v in self._cache.items() if k[0] != stack.id}
            self._cache[key] = found
        return found

    def cached(self, stack_id: str, version: int) -> Definition | None:
        """The definition of that stack version if this process has parsed it already."""
        return self._cache.get((stack_id, version))

    def forget(self, stack_id: str) -> None:
        self._cache = {k: v for k, v in self._cache.items() if k[0] != stack_id}


def plain(value: Any) -> Any:
    """The JSON form of a resolved value, for storage and comparison; Secrets stay Secrets."""
    return taint.loads(json.dumps(value, default=_stored))


def _stored(value: Any) -> Any:
    return taint.json_default(value) if isinstance(value, taint.Secret) else str(value)
