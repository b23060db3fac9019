"""Environment files: parameter values and the resource_registry that renames types."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from control.hot.errors import TemplateError, at
from control.hot.loader import MAX_TEMPLATE_BYTES, load_yaml
from control.hot.schema import describe

SECTIONS = ("parameters", "parameter_defaults", "resource_registry", "encrypted_param_names", "event_sinks")
MAX_CHAIN = 10
_TEMPLATE_SUFFIXES = (".yaml", ".yml", ".template", ".json", ".hot")
_NESTED = "nested templates are not supported yet"


@dataclass(frozen=True)
class Environment:
    parameters: Mapping[str, Any] = field(default_factory=dict)
    parameter_defaults: Mapping[str, Any] = field(default_factory=dict)
    resource_registry: Mapping[str, str] = field(default_factory=dict)  # name or glob -> type


def parse_environment(
    text: str, what: str = "environment", max_bytes: int = MAX_TEMPLATE_BYTES
) -> Environment:
    """Parse one environment file of at most *max_bytes*; encrypted_param_names and event_sinks are ignored."""
    data = load_yaml(text, what, max_bytes)
    if data is None:
        return Environment()
    if not isinstance(data, Mapping):
        raise TemplateError(what, f"expected a map of sections, got {describe(data)}")
    for key in data:
        if key not in SECTIONS:
            raise TemplateError(at(what, key), f"unknown section; known: {', '.join(SECTIONS)}")
    return Environment(
        parameters=_section(data, "parameters", what),
        parameter_defaults=_section(data, "parameter_defaults", what),
        resource_registry=_registry(_section(data, "resource_registry", what), at(what, "resource_registry")),
    )


def _section(data: Mapping[str, Any], key: str, what: str) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TemplateError(at(what, key), f"expected a map, got {describe(value)}")
    for name in value:
        if not isinstance(name, str):
            raise TemplateError(at(what, key), f"names must be strings, not {name!r}")
    return dict(value)


def _registry(section: Mapping[str, Any], path: str) -> dict[str, str]:
    registry: dict[str, str] = {}
    for name, target in section.items():
        where = at(path, name)
        if name == "resources" or isinstance(target, Mapping):
            raise TemplateError(where, f"per-resource mappings: {_NESTED}")
        if name == "base_url":
            continue  # only locates template files, which are refused below anyway
        if not isinstance(target, str) or not target:
            raise TemplateError(where, f"expected a resource type name, got {describe(target)}")
        if "/" in target or target.lower().endswith(_TEMPLATE_SUFFIXES):
            raise TemplateError(where, f"{target!r} is a template file: {_NESTED}")
        registry[name] = target
    return registry


def merge_environments(envs: Sequence[Environment]) -> Environment:
    """One environment from several; later ones win, maps merged key by key."""
    merged = Environment()
    for env in envs:
        merged = Environment(
            parameters={**merged.parameters, **env.parameters},
            parameter_defaults={**merged.parameter_defaults, **env.parameter_defaults},
            resource_registry={**merged.resource_registry, **env.resource_registry},
        )
    return merged


def _lookup(registry: Mapping[str, str], type_name: str) -> str | None:
    """The exact entry, else the most specific (longest) matching glob, else None."""
    if type_name in registry:
        return registry[type_name]
    globs = [p for p in registry if any(c in p for c in "*?[") and fnmatch.fnmatchcase(type_name, p)]
    return registry[max(globs, key=len)] if globs else None


def map_type(env: Environment, type_name: str) -> str:
    """The type ``type_name`` stands for after following the resource_registry."""
    seen = [type_name]
    current = type_name
    while True:
        target = _lookup(env.resource_registry, current)
        if target is None or target == current:
            return current
        if target in seen:
            loop = " -> ".join([*seen[seen.index(target) :], target])
            raise TemplateError("resource_registry", f"mapping loop: {loop}")
        if len(seen) > MAX_CHAIN:
            raise TemplateError("resource_registry", f"{type_name} maps through more than {MAX_CHAIN} names")
        seen.append(target)
        current = target
