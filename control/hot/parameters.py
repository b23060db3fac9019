"""Template parameters: their declarations, types and constraints, and the values a stack gets.

Messages never show the value of a hidden parameter.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import regex

from control.hot import budget
from control.hot.errors import TemplateError, at
from control.hot.schema import describe

PARAMETER_TYPES = ("string", "number", "json", "comma_delimited_list", "boolean")
PSEUDO_PARAMETERS = frozenset({"OS::stack_name", "OS::stack_id", "OS::project_id"})
_KEYS = frozenset({"type", "default", "hidden", "label", "description", "immutable", "tags", "constraints"})
# Which parameter types each constraint applies to (Heat's rule).
_APPLIES = {
    "length": ("string", "comma_delimited_list", "json"),
    "range": ("number",),
    "modulo": ("number",),
    "allowed_values": ("string", "number", "comma_delimited_list", "boolean"),
    "allowed_pattern": ("string",),
    "custom_constraint": PARAMETER_TYPES,
}
_TRUE = frozenset({"true", "yes", "on", "1", "t", "y"})
_FALSE = frozenset({"false", "no", "off", "0", "f", "n"})


@dataclass(frozen=True)
class ParameterDef:
    name: str
    type: str
    default: Any  # as written in the template
    has_default: bool
    hidden: bool
    description: str | None
    label: str | None
    constraints: tuple[Mapping[str, Any], ...]
    immutable: bool = False


@dataclass(frozen=True)
class Parameters:
    values: Mapping[str, Any]  # final, converted values
    hidden: frozenset[str]
    warnings: tuple[str, ...]


def _show(value: Any, hidden: bool) -> str:
    return "the value" if hidden else json.dumps(value, default=str)


def parse_parameter_defs(section: Any, warnings: list[str]) -> dict[str, ParameterDef]:
    """The ``parameters`` section as ParameterDefs, defaults converted and checked."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise TemplateError("parameters", f"expected a map of name -> definition, got {describe(section)}")
    return {_name(name): _parse_def(name, body, warnings) for name, body in section.items()}


def _name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise TemplateError("parameters", f"parameter names must be strings, not {name!r}")
    return name


def _flag(body: Mapping[str, Any], key: str, path: str) -> bool:
    value = body.get(key, False)
    try:
        return bool(to_boolean(value))
    except ValueError:
        raise TemplateError(at(path, key), f"expected true or false, got {describe(value)}") from None


def _text(body: Mapping[str, Any], key: str, path: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise TemplateError(at(path, key), f"expected a string, got {describe(value)}")
    return value


def _parse_def(name: str, body: Any, warnings: list[str]) -> ParameterDef:
    path = f"parameters.{name}"
    if not isinstance(body, Mapping):
        raise TemplateError(path, f"expected a map with at least 'type', got {describe(body)}")
    for key in body:
        if key not in _KEYS:
            raise TemplateError(at(path, key), f"unknown key; known: {', '.join(sorted(_KEYS))}")
    ptype = body.get("type")
    if ptype not in PARAMETER_TYPES:
        raise TemplateError(at(path, "type"), f"must be one of {', '.join(PARAMETER_TYPES)}")
    tags = body.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise TemplateError(at(path, "tags"), "expected a list of strings")
    pdef = ParameterDef(
        name=name,
        type=ptype,
        default=body.get("default"),
        has_default=body.get("default") is not None,
        hidden=_flag(body, "hidden", path),
        description=_text(body, "description", path),
        label=_text(body, "label", path),
        constraints=_parse_constraints(body.get("constraints"), ptype, path, warnings),
        immutable=_flag(body, "immutable", path),
    )
    if pdef.has_default:
        where = at(path, "default")
        check_constraints(pdef, convert(ptype, pdef.default, where, pdef.hidden), where)
    return pdef


def _parse_constraints(
    section: Any, ptype: str, path: str, warnings: list[str]
) -> tuple[Mapping[str, Any], ...]:
    path = at(path, "constraints")
    if section is None:
        return ()
    if not isinstance(section, list):
        raise TemplateError(path, f"expected a list of constraints, got {describe(section)}")
    for i, constraint in enumerate(section):
        _check_constraint(constraint, ptype, at(path, i), warnings)
    return tuple(section)


def _check_constraint(c: Any, ptype: str, path: str, warnings: list[str]) -> None:
    kinds = [k for k in c if k != "description"] if isinstance(c, Mapping) else []
    if len(kinds) != 1 or kinds[0] not in _APPLIES:
        raise TemplateError(path, f"expected one of {', '.join(_APPLIES)} (and a description)")
    kind, arg = kinds[0], c[kinds[0]]
    if not isinstance(c.get("description", ""), str):
        raise TemplateError(at(path, "description"), "expected a string")
    if ptype not in _APPLIES[kind]:
        raise TemplateError(path, f"{kind} does not apply to {ptype} parameters")
    if kind in ("length", "range"):
        bounds = arg if isinstance(arg, Mapping) else {}
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in bounds.values())
        if not bounds or set(bounds) - {"min", "max"} or not numeric:
            raise TemplateError(at(path, kind), "expected {min: N, max: N} with at least one")
        if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
            raise TemplateError(at(path, kind), "min is greater than max")
    elif kind == "modulo":
        _check_modulo(arg, at(path, kind))
    elif kind == "allowed_values" and not isinstance(arg, list):
        raise TemplateError(at(path, kind), "expected a list of values")
    elif kind == "allowed_pattern":
        try:  # Python's syntax is Heat's; the engine that matches must read it too
            re.compile(arg)
            regex.compile(arg)
        except (re.error, regex.error, TypeError) as e:
            raise TemplateError(at(path, kind), f"not a valid regular expression: {e}") from None
    elif kind == "custom_constraint":
        if not isinstance(arg, str):
            raise TemplateError(at(path, kind), "expected the name of a constraint")
        warnings.append(f"{path}: custom_constraint {arg!r} is not checked by Anneal")


def _check_modulo(arg: Any, path: str) -> None:
    values: list[Any] = [arg.get("step"), arg.get("offset")] if isinstance(arg, Mapping) else []
    integral = all(isinstance(v, int | float) and not isinstance(v, bool) and int(v) == v for v in values)
    if not isinstance(arg, Mapping) or set(arg) != {"step", "offset"} or not integral:
        raise TemplateError(path, "expected {step: N, offset: N} with integers")
    step, offset = values
    if step == 0 or abs(offset) >= abs(step) or step * offset < 0:
        raise TemplateError(path, "step must be non-zero and offset smaller than step, same sign")


def to_boolean(value: Any) -> bool:
    """Heat's reading of a boolean: true/false/yes/no/on/off/1/0/t/f/y/n in any case."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower() if isinstance(value, str | int) else None
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ValueError(value)


def _to_number(value: Any) -> int | float:
    """An int when integral, else a float; numbers written as text are parsed."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return int(number) if number.is_integer() else number


def _to_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [v if isinstance(v, str) else json.dumps(v) for v in value]
    if isinstance(value, Mapping) or value is None:
        raise ValueError(value)
    text = str(value)
    return [part.strip() for part in text.split(",")] if text else []


def _to_json(value: Any) -> Any:
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else {}
    if not isinstance(value, Mapping | list):
        raise ValueError(value)
    return value


def _to_string(value: Any) -> str:
    if isinstance(value, Mapping | list) or value is None:
        raise ValueError(value)
    return str(value)


_CONVERT = {
    "string": _to_string,
    "number": _to_number,
    "comma_delimited_list": _to_list,
    "json": _to_json,
    "boolean": to_boolean,
}
_EXPECTED = {
    "string": "a string",
    "number": "a number",
    "comma_delimited_list": "a comma-delimited list",
    "json": "a JSON map or list",
    "boolean": "a boolean",
}


def convert(ptype: str, value: Any, path: str, hidden: bool = False) -> Any:
    """A parameter value converted to its type; TemplateError(path, ...) when it cannot be."""
    try:
        return _CONVERT[ptype](value)
    except (ValueError, TypeError, OverflowError):
        raise TemplateError(path, f"{_show(value, hidden)} is not {_EXPECTED[ptype]}") from None


def check_constraints(pdef: ParameterDef, value: Any, path: str) -> None:
    """Raise TemplateError(path, ...) for the first constraint the converted value breaks."""
    for c in pdef.constraints:
        problem = _violation(c, pdef.type, value, _show(value, pdef.hidden), path)
        if problem is not None:
            raise TemplateError(path, c.get("description") or problem)


def _span(bounds: Mapping[str, Any]) -> str:
    return f"{bounds.get('min', '')}..{bounds.get('max', '')}"


def _within(number: float, bounds: Mapping[str, Any]) -> bool:
    return bool(bounds.get("min", number) <= number <= bounds.get("max", number))


def _violation(c: Mapping[str, Any], ptype: str, value: Any, shown: str, path: str) -> str | None:
    kind = next(k for k in c if k != "description")
    arg = c[kind]
    if kind == "length" and not _within(len(value), arg):
        return f"the length of {shown} is {len(value)}, not in range {_span(arg)}"
    if kind == "range" and not _within(value, arg):
        return f"{shown} is not in range {_span(arg)}"
    if kind == "modulo" and value % arg["step"] != arg["offset"]:
        return f"{shown} is not a multiple of {arg['step']} with offset {arg['offset']}"
    if kind == "allowed_values":
        allowed = [_allowed_as(ptype, a) for a in arg]
        items = value if isinstance(value, list) else [value]
        if any(item not in allowed for item in items):
            return f"{shown} is not one of {json.dumps(arg, default=str)}"
    if kind == "allowed_pattern" and not _matches(arg, value, path):
        return f"{shown} does not match the pattern {arg!r}"
    return None


def _matches(pattern: str, value: str, path: str) -> bool:
    """Whether *value* matches *pattern* whole, within the evaluation's time for patterns.

    Python's ``re`` (Heat's engine) backtracks without bound: ``(a|a)+`` on 30 characters
    takes hours. ``regex`` reads the same syntax, stops at a timeout and lets go of the GIL
    while it matches, so a check run in a worker thread never stalls the event loop.
    """
    spent = budget.current()
    if not spent.patterns:
        return True  # checked when the values were given
    started = time.monotonic()
    try:
        return (
            regex.fullmatch(pattern, value, timeout=max(spent.pattern_left, 0.001), concurrent=True)
            is not None
        )
    except TimeoutError:
        raise TemplateError(
            path,
            f"allowed_pattern {pattern!r} took more than the {spent.pattern_seconds:g} s the template's "
            "patterns may take to match: it backtracks (as (a|a)+ does); rewrite it",
        ) from None
    except regex.error as e:
        raise TemplateError(path, f"allowed_pattern {pattern!r} cannot be evaluated: {e}") from None
    finally:
        spent.pattern_left -= time.monotonic() - started


def _allowed_as(ptype: str, allowed: Any) -> Any:
    """An allowed value in the parameter's type, so '1' allows 1 for a number (Heat's rule)."""
    try:
        if ptype == "comma_delimited_list":
            return _to_string(allowed)
        return _CONVERT[ptype](allowed) if ptype in ("string", "number", "boolean") else allowed
    except (ValueError, TypeError, OverflowError):
        return allowed
