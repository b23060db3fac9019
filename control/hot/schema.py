"""Property schemas (PropSpec, TypeSpec) and the checks of literal values against them.

Property values that are function calls are not checked here; they are checked when the
engine evaluates them. ``types`` holds the schemas of the resource types Anneal supports.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from control.hot.errors import TemplateError, at
from control.hot.functions import call_of

IGNORED = "ignored (the control plane boots no servers)"
BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0", "t", "f", "y", "n"})


@dataclass(frozen=True)
class PropSpec:
    """One property; for a list, ``allowed`` applies to each item and ``schema`` to map items."""

    type: str  # 'string' | 'integer' | 'number' | 'boolean' | 'map' | 'list' | 'any'
    required: bool = False
    default: Any = None
    allowed: tuple[Any, ...] | None = None
    update: str = "allowed"  # 'allowed' (update in place) or 'replace' (change => replacement)
    ignored: bool = False  # accepted and ignored with a warning
    schema: Mapping[str, PropSpec] | None = None  # for a list of maps: each item's keys


@dataclass(frozen=True)
class TypeSpec:
    name: str
    properties: Mapping[str, PropSpec]
    attributes: frozenset[str] | None  # None: any name (the engine checks)
    open_properties: bool = False  # True: unknown properties are accepted with a warning
    check: Callable[[Mapping[Any, Any], str], None] | None = None  # type's own literal checks
    update_policy: Mapping[str, PropSpec] | None = None  # the update_policy keys it takes
    attribute_prefixes: tuple[str, ...] = ()  # attribute names starting so are its too (resource.<n>)


def _parses(value: Any, parse: Callable[[str], Any]) -> bool:
    """True for a string that ``parse`` accepts (Heat accepts numbers written as text)."""
    if not isinstance(value, str):
        return False
    try:
        parse(value)
    except ValueError:
        return False
    return True


def is_integer(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or _parses(value, int)


def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) or _parses(value, float)


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str | int | float),  # Heat turns numbers into text
    "integer": is_integer,
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool) or (isinstance(v, str) and v.lower() in BOOLEAN_WORDS),
    "map": lambda v: isinstance(v, Mapping),
    "list": lambda v: isinstance(v, list),
    "any": lambda v: True,
}
_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "map": "a map",
    "list": "a list",
}


def describe(value: Any) -> str:
    """A short name of a value's kind for messages: 'a list', 'a string'."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a map"
    return "a list" if isinstance(value, list) else type(value).__name__


def check_value(spec: PropSpec, value: Any, path: str) -> None:
    """Raise when a literal value does not fit ``spec`` (calls and nulls pass)."""
    if value is None or call_of(value) is not None:
        return
    if not _CHECKS[spec.type](value):
        raise TemplateError(path, f"expected {_NAMES[spec.type]}, got {describe(value)}")
    items = value if spec.type == "list" else [value]
    for i, item in enumerate(items):
        where = at(path, i) if spec.type == "list" else path
        if spec.allowed is not None and call_of(item) is None and item not in spec.allowed:
            allowed = ", ".join(str(a) for a in spec.allowed)
            raise TemplateError(where, f"{item!r} is not one of {allowed}")
        if spec.schema is not None and call_of(item) is None:
            if not isinstance(item, Mapping):
                raise TemplateError(where, f"expected a map, got {describe(item)}")
            check_keys(spec.schema, item, where)


def check_keys(schema: Mapping[str, PropSpec], value: Mapping[Any, Any], path: str) -> None:
    """Raise on an unknown key, a missing required key or a literal value of the wrong type."""
    for key, item in value.items():
        if key not in schema:
            raise TemplateError(at(path, key), f"unknown key; known: {', '.join(schema)}")
        check_value(schema[key], item, at(path, key))
    for key, spec in schema.items():
        if spec.required and value.get(key) is None:
            raise TemplateError(at(path, key), "is required")


def check_properties(spec: TypeSpec, props: Mapping[Any, Any], path: str, warnings: list[str]) -> None:
    """Check a resource's literal properties against its type; warn about ignored ones."""
    for key, value in props.items():
        where = at(path, key)
        prop = spec.properties.get(key) if isinstance(key, str) else None
        if prop is None and spec.open_properties:
            warnings.append(f"{where}: accepted and ignored by {spec.name}")
        elif prop is None:
            known = ", ".join(spec.properties)
            raise TemplateError(where, f"unknown property of {spec.name}; known: {known}")
        elif prop.ignored:
            warnings.append(f"{where}: {IGNORED}")
        else:
            check_value(prop, value, where)
    for key, prop in spec.properties.items():
        if prop.required and props.get(key) is None:
            raise TemplateError(at(path, key), f"required property of {spec.name} is missing")
    if spec.check is not None:
        spec.check(props, path)


def apply_defaults(spec: TypeSpec, props: Mapping[str, Any]) -> dict[str, Any]:
    """Resolved properties with each absent or null one set to (a copy of) its default."""
    out = dict(props)
    for key, prop in spec.properties.items():
        if out.get(key) is None and prop.default is not None:
            out[key] = copy.deepcopy(prop.default)
    return out
