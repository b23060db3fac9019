"""Environment files: parameter values and the resource_registry that renames types."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from control.hot import retry
from control.hot.errors import TemplateError, at
from control.hot.loader import MAX_TEMPLATE_BYTES, load_yaml
from control.hot.schema import describe

SECTIONS = (
    "parameters",
    "parameter_defaults",
    "resource_registry",
    "encrypted_param_names",
    "event_sinks",
    "deployment_defaults",
)
#: What ``deployment_defaults`` (Anneal's section; Heat has none) may set for every deployment of
#: the stack and of the stacks it nests that does not set it itself; ``converge_interval`` (seconds)
#: is the stack's: check its servers and converge what drifted that often (services/autoconverge.py).
DEPLOYMENT_DEFAULTS = ("retry", "converge_interval")
#: The shortest converge_interval: each round asks every server of the stack for a check.
MIN_CONVERGE_INTERVAL = 1.0
MAX_CHAIN = 10
#: Keys of a per-resource entry that are not type mappings; accepted and ignored with a warning.
_IGNORED_ENTRY_KEYS = {
    "restricted_actions": "restricted_actions is not supported: updates and replacements are not restricted",
}
#: Breakpoints (``hooks``) that pause a resource until `stack hook clear` (control/engine/breakpoints.py).
HOOKS = ("pre-create", "pre-update")
#: Breakpoints later Heat releases know: accepted with a warning, nothing pauses there.
_UNPAUSED_HOOKS = ("pre-delete", "post-create", "post-update", "post-delete")


@dataclass(frozen=True)
class Environment:
    parameters: Mapping[str, Any] = field(default_factory=dict)
    parameter_defaults: Mapping[str, Any] = field(default_factory=dict)
    resource_registry: Mapping[str, str] = field(default_factory=dict)  # name or glob -> type or template
    #: ``resource_registry.resources``: resource name (or glob) -> its own mappings, and maps for
    #: the resources of its nested stack, as Heat writes them.
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: ``deployment_defaults``: property -> value for the deployments that leave it unset.
    deployment_defaults: Mapping[str, Any] = field(default_factory=dict)


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
    section = _section(data, "resource_registry", what)
    path = at(what, "resource_registry")
    warnings: list[str] = []
    resources = _per_resource(section.pop("resources", None), at(path, "resources"), warnings)
    return Environment(
        parameters=_section(data, "parameters", what),
        parameter_defaults=_section(data, "parameter_defaults", what),
        resource_registry=_registry(section, path),
        resources=resources,
        warnings=tuple(warnings),
        deployment_defaults=_deployment_defaults(data, what),
    )


def _deployment_defaults(data: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The ``deployment_defaults`` section, each value checked as the property it stands for."""
    section = _section(data, "deployment_defaults", what)
    path = at(what, "deployment_defaults")
    for key, value in section.items():
        if key not in DEPLOYMENT_DEFAULTS:
            raise TemplateError(at(path, key), f"unknown default; known: {', '.join(DEPLOYMENT_DEFAULTS)}")
        if key == "retry":
            retry.policy(value, at(path, key))
        elif isinstance(value, bool) or not isinstance(value, int | float) or value < MIN_CONVERGE_INTERVAL:
            raise TemplateError(
                at(path, key),
                f"expected seconds (a number of at least {MIN_CONVERGE_INTERVAL:g}), got {value!r}",
            )
    return section


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
        if name == "base_url":
            continue  # locates relative template files: the client resolved them already
        if not isinstance(target, str) or not target:
            raise TemplateError(
                at(path, name), f"expected a resource type name or a template, got {describe(target)}"
            )
        registry[name] = target
    return registry


def _per_resource(section: Any, path: str, warnings: list[str]) -> dict[str, dict[str, Any]]:
    """``resources: {name: {Type: target, hooks: ..., nested_name: {...}}}``, checked."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise TemplateError(path, f"expected a map of resource name -> entry, got {describe(section)}")
    out: dict[str, dict[str, Any]] = {}
    for name, entry in section.items():
        where = at(path, name)
        if not isinstance(name, str) or not isinstance(entry, Mapping):
            raise TemplateError(
                where, f"expected a map of type mappings and nested resources, got {describe(entry)}"
            )
        checked: dict[str, Any] = {}
        for key, value in entry.items():
            if key == "hooks":
                checked[key] = _hooks(value, at(where, key), warnings)
            elif key in _IGNORED_ENTRY_KEYS:
                warnings.append(f"{at(where, key)}: {_IGNORED_ENTRY_KEYS[key]}")
            elif isinstance(value, Mapping):
                checked[key] = _per_resource({key: value}, where, warnings)[key]
            elif isinstance(value, str) and value:
                checked[key] = value
            else:
                raise TemplateError(
                    at(where, key), f"expected a type, a template or a nested entry, got {describe(value)}"
                )
        out[name] = checked
    return out


def _hooks(value: Any, path: str, warnings: list[str]) -> list[str]:
    """``hooks: pre-create`` or a list of hook names: the ones that pause, checked."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(h, str) for h in items):
        raise TemplateError(path, f"expected a hook name or a list of them, got {describe(value)}")
    for hook in items:
        if hook in _UNPAUSED_HOOKS:
            warnings.append(
                f"{path}: {hook} does not pause the resource here (only {' and '.join(HOOKS)} do)"
            )
        elif hook not in HOOKS:
            raise TemplateError(path, f"unknown hook {hook!r}; known: {', '.join(HOOKS + _UNPAUSED_HOOKS)}")
    return [h for h in items if h in HOOKS]


def hooks_for(env: Environment, resource_name: str) -> frozenset[str]:
    """The breakpoints set on *resource_name* by its own entry and the globs matching it."""
    found: set[str] = set()
    for pattern in _matching(env.resources, resource_name):
        found.update(env.resources[pattern].get("hooks") or ())
    return frozenset(found)


def to_json(env: Environment) -> dict[str, Any]:
    """The environment as a stack row stores it (Heat's layout: ``resources`` under the registry)."""
    registry: dict[str, Any] = dict(env.resource_registry)
    if env.resources:
        registry["resources"] = dict(env.resources)
    out = {
        "parameters": dict(env.parameters),
        "parameter_defaults": dict(env.parameter_defaults),
        "resource_registry": registry,
    }
    if env.deployment_defaults:
        out["deployment_defaults"] = dict(env.deployment_defaults)
    return out


def from_json(obj: Mapping[str, Any]) -> Environment:
    registry = dict(obj.get("resource_registry") or {})
    resources = registry.pop("resources", None) or {}
    return Environment(
        parameters=dict(obj.get("parameters") or {}),
        parameter_defaults=dict(obj.get("parameter_defaults") or {}),
        resource_registry=registry,
        resources=dict(resources),
        deployment_defaults=dict(obj.get("deployment_defaults") or {}),
    )


def child_environment(env: Environment, resource_name: str) -> Environment:
    """What a nested stack made by *resource_name* gets (Heat's rule): the registry and
    parameter_defaults, not the parameters; the per-resource entries below that name."""
    nested: dict[str, Any] = {}
    for pattern in _matching(env.resources, resource_name):
        for key, value in env.resources[pattern].items():
            if isinstance(value, Mapping):
                nested[key] = {**nested.get(key, {}), **value}
    return Environment(
        parameter_defaults=env.parameter_defaults,
        resource_registry=env.resource_registry,
        resources=nested,
        deployment_defaults=env.deployment_defaults,
    )


def _matching(resources: Mapping[str, Any], name: str) -> list[str]:
    """The per-resource entries that apply to *name*: globs (shortest first), then the exact one."""
    globs = [p for p in resources if p != name and fnmatch.fnmatchcase(name, p)]
    return sorted(globs, key=len) + ([name] if name in resources else [])


def merge_environments(envs: Sequence[Environment]) -> Environment:
    """One environment from several; later ones win, maps merged key by key."""
    merged = Environment()
    for env in envs:
        merged = Environment(
            parameters={**merged.parameters, **env.parameters},
            parameter_defaults={**merged.parameter_defaults, **env.parameter_defaults},
            resource_registry={**merged.resource_registry, **env.resource_registry},
            resources={**merged.resources, **env.resources},
            warnings=merged.warnings + env.warnings,
            deployment_defaults={**merged.deployment_defaults, **env.deployment_defaults},
        )
    return merged


def _lookup(registry: Mapping[str, str], type_name: str) -> str | None:
    """The exact entry, else the most specific (longest) matching glob, else None."""
    if type_name in registry:
        return registry[type_name]
    globs = [p for p in registry if any(c in p for c in "*?[") and fnmatch.fnmatchcase(type_name, p)]
    return registry[max(globs, key=len)] if globs else None


def map_type(env: Environment, type_name: str, resource_name: str | None = None) -> str:
    """The type ``type_name`` stands for after following the resource_registry.

    A per-resource entry for *resource_name* (``resources: {name: {Type: target}}``) is
    applied first, then the global entries.
    """
    seen = [type_name]
    current = type_name
    if resource_name is not None:
        for pattern in reversed(_matching(env.resources, resource_name)):
            target = env.resources[pattern].get(type_name)
            if isinstance(target, str):
                current = target
                seen.append(target)
                break
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
