"""Template resources: a resource whose type is a template in the stack's files.

Parsing a stack parses every template it nests, to the depth cap, so a problem anywhere
below is refused when the stack is created, at its path. The nested template's
parameters are the resource's properties; its outputs (and ``resource.<name>.<attr>``,
``OS::stack_id``) are the resource's attributes.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from control.hot.environment import Environment, child_environment
from control.hot.errors import TemplateError, at
from control.hot.files import canonical, closure, is_template_ref, lookup
from control.hot.functions import calls
from control.hot.loader import load_yaml
from control.hot.parameters import check_constraints, convert
from control.hot.template import Template

#: Heat's default max_nested_stack_depth; ``anneal serve --max-nested-depth`` sets another.
MAX_NESTED_DEPTH = 5
#: Attributes every template resource has besides its template's outputs.
STACK_ID = "OS::stack_id"

Parse = Callable[[Any, Mapping[str, str], Environment, "Nesting"], Template]


@dataclass
class Nesting:
    """Where the template being parsed sits: its stack's depth, the cap, and templates parsed so far."""

    depth: int = 0
    max_depth: int = MAX_NESTED_DEPTH
    cache: dict[tuple[str, int, str], Template] = field(default_factory=dict)

    def deeper(self) -> Nesting:
        return Nesting(self.depth + 1, self.max_depth, self.cache)


def load_nested(files: Mapping[str, str], ref: str, path: str) -> tuple[str, Any]:
    """(key, source) of the template *ref* names: read from the files, its own names made keys.

    *source* is shared by every caller that reads the same text (``read_template``): read it only.
    """
    key = lookup(files, ref)
    if key is None:
        raise TemplateError(
            path,
            f"template {ref!r} was not provided: a template named as a type travels in the request's "
            "files (the anneal CLI and python-heatclient send it)",
        )
    source = read_template(files[key], key)
    if not isinstance(source, Mapping):
        raise TemplateError(path, f"template {key} is not a map of sections")
    return key, source


#: Templates read from files, by (key, text), the most recently read last (``read_template``).
_READ: OrderedDict[tuple[str, str], Any] = OrderedDict()
#: How many ``_READ`` keeps.
READ_KEPT = 16


def read_template(text: str, key: str) -> Any:
    """The template in file *key* (its text), its file names made keys, read once per process for
    equal text: each member of a group of 10,000 template resources reads the same file, and
    reading it (YAML, its checks, the names made keys) cost more than the member's own step."""
    if not isinstance(text, str):
        return canonical(load_yaml(text, f"files[{key}]"), key)  # load_yaml says what is wrong
    found = _READ.get((key, text))
    if found is None:
        found = _READ[(key, text)] = canonical(load_yaml(text, f"files[{key}]"), key)
        if len(_READ) > READ_KEPT:
            _READ.popitem(last=False)
    else:
        _READ.move_to_end((key, text))
    return found


def parse_nested(
    name: str,
    ref: str,
    path: str,
    files: Mapping[str, str],
    env: Environment,
    nesting: Nesting,
    parse: Parse,
) -> tuple[str, Template]:
    """(key, parsed template) of the template resource *name* of type *ref*, one level deeper."""
    if nesting.depth + 1 > nesting.max_depth:
        raise TemplateError(
            path,
            f"template {ref!r} would nest stacks {nesting.depth + 1} deep, more than the limit of "
            f"{nesting.max_depth} (anneal serve --max-nested-depth)",
        )
    key, source = load_nested(files, ref, path)
    child_env = child_environment(env, name)
    cache_key = (key, nesting.depth + 1, json.dumps(child_env.resources, sort_keys=True, default=str))
    found = nesting.cache.get(cache_key)
    if found is None:
        try:
            found = parse(source, files, child_env, nesting.deeper())
        except TemplateError as e:
            raise TemplateError(path, f"in template {key}: {e}") from e
        nesting.cache[cache_key] = found
    return key, found


def check_properties(
    nested: Template, key: str, props: Mapping[str, Any], path: str, env: Environment
) -> None:
    """The resource's properties against the nested template's parameters (literal values only)."""
    for name, value in props.items():
        where = at(path, name)
        pdef = nested.parameters.get(name)
        if pdef is None:
            known = ", ".join(nested.parameters) or "none"
            raise TemplateError(where, f"template {key} has no parameter {name!r}; it has: {known}")
        if value is not None and next(calls(value), None) is None:
            check_constraints(pdef, convert(pdef.type, value, where, pdef.hidden), where)
    for name, pdef in nested.parameters.items():
        if props.get(name) is None and not pdef.has_default and name not in env.parameter_defaults:
            raise TemplateError(
                at(path, name), f"is required: parameter {name} of template {key} has no default"
            )


def check_attribute(nested: Template, key: str, attribute: str, path: str) -> None:
    """A template resource's attributes: its outputs, ``OS::stack_id``, ``resource.<name>[.<attr>]``."""
    if attribute in nested.outputs or attribute == STACK_ID:
        return
    if attribute.startswith("resource."):
        target = attribute.split(".", 2)[1]
        if target in nested.resources:
            return
        raise TemplateError(path, f"get_attr: template {key} has no resource {target!r}")
    outputs = ", ".join(sorted(nested.outputs)) or "none"
    raise TemplateError(
        path,
        f"get_attr: template {key} has no output {attribute!r}; its outputs: {outputs} "
        f"(also {STACK_ID} and resource.<name>.<attribute>)",
    )


def child_files(files: Mapping[str, str], roots: Iterable[str], env: Environment) -> dict[str, str]:
    """The parent's files a nested stack needs: its templates' and the environment's, transitively.

    The last few are kept by the identity of *files* (held with them, so the id is not reused): the
    members of a group, made in one step from one stack row's files, then read those templates once.
    """
    registry = [*env.resource_registry.values(), *_per_resource_targets(env.resources)]
    templates = tuple(t for t in [*roots, *registry] if is_template_ref(t, files))
    key = (id(files), templates)
    found = _CLOSURES.get(key)
    if found is None or found[0] is not files:
        found = _CLOSURES[key] = (files, closure(files, templates, load_yaml))
        if len(_CLOSURES) > CLOSURES_KEPT:
            del _CLOSURES[next(iter(_CLOSURES))]
    return dict(found[1])


#: ``child_files`` of the last few files maps: by (id, templates), with the map itself.
_CLOSURES: dict[tuple[int, tuple[str, ...]], tuple[Mapping[str, str], dict[str, str]]] = {}
CLOSURES_KEPT = 8


def _per_resource_targets(entries: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for entry in entries.values():
        for key, value in entry.items():
            if key == "hooks":
                continue  # breakpoints, not a type
            out += _per_resource_targets({"": value}) if isinstance(value, Mapping) else [value]
    return out
