"""CloudFormation-format templates (``AWSTemplateFormatVersion``) read as the HOT they stand for.

Heat takes ``AWSTemplateFormatVersion: 2010-09-09`` (with ``Conditions`` and ``Fn::If``)
and ``HeatTemplateFormatVersion: 2012-12-12`` (without). ``to_hot`` renames the sections
and keys (``Resources.x.Properties`` is ``resources.x.properties``) and turns ``Parameters``
into HOT parameter definitions; ``cfn.desugar`` then rewrites the functions. Everything
after is HOT's own path, so a deployment in CFN form runs exactly as in HOT. ``cfn_path``
names a problem the way the CFN template spells it.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

from control.hot.errors import TemplateError, at
from control.hot.schema import describe

#: The version key, the one value Heat accepts for it, and the sections it allows.
_BASE = ("Description", "Mappings", "Parameters", "Resources", "Outputs")
FORMATS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "AWSTemplateFormatVersion": ("2010-09-09", (*_BASE, "Conditions")),
    "HeatTemplateFormatVersion": ("2012-12-12", _BASE),
}
_RESOURCE_KEYS = {
    "Type": "type",
    "Properties": "properties",
    "Metadata": "metadata",
    "DependsOn": "depends_on",
    "DeletionPolicy": "deletion_policy",
    "UpdatePolicy": "update_policy",
    "Condition": "condition",
    "Description": None,  # kept for people, as Heat keeps it; nothing acts on it
}
_OUTPUT_KEYS = {"Value": "value", "Description": "description", "Condition": "condition"}
_SECTIONS = {"Parameters": "parameters", "Resources": "resources", "Outputs": "outputs"}
_PARAMETER_TYPES = {
    "String": "string",
    "Number": "number",
    "CommaDelimitedList": "comma_delimited_list",
    "Json": "json",
    "Boolean": "boolean",
}
_PARAMETER_KEYS = (
    "Type",
    "Default",
    "NoEcho",
    "AllowedValues",
    "AllowedPattern",
    "MaxLength",
    "MinLength",
    "MaxValue",
    "MinValue",
    "Description",
    "ConstraintDescription",
    "Label",
)


def format_key(data: Mapping[str, Any]) -> str | None:
    """The CFN version key *data* has (None: it is not a CFN-format template)."""
    return next((key for key in FORMATS if key in data), None)


def to_hot(data: Mapping[str, Any], key: str) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The HOT document a CFN template stands for, its version, and its ``Mappings``."""
    version, sections = FORMATS[key]
    given = data[key]
    if isinstance(given, datetime.date):
        given = given.isoformat()
    if given != version:
        raise TemplateError(key, f"{given!r} is not supported; Heat's {key} is {version!r}")
    for name in data:
        if name != key and name not in sections:
            raise TemplateError(str(name), f"unknown section; allowed: {', '.join((key, *sections))}")
    if "AWSTemplateFormatVersion" in data and "HeatTemplateFormatVersion" in data:
        raise TemplateError("HeatTemplateFormatVersion", "a template has one version key, not two")
    hot: dict[str, Any] = {
        "description": data.get("Description") or "",
        "parameters": {n: _parameter(n, b) for n, b in _section(data, "Parameters").items()},
        "resources": {
            n: _renamed(b, _RESOURCE_KEYS, f"Resources.{n}") for n, b in _section(data, "Resources").items()
        },
        "outputs": {
            n: _renamed(b, _OUTPUT_KEYS, f"Outputs.{n}") for n, b in _section(data, "Outputs").items()
        },
    }
    if data.get("Conditions"):
        hot["conditions"] = _section(data, "Conditions")
    return hot, version, _mappings(data.get("Mappings"))


def _section(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    section = data.get(name)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise TemplateError(name, f"expected a map of name -> definition, got {describe(section)}")
    for key in section:
        if not isinstance(key, str) or not key:
            raise TemplateError(name, f"names must be non-empty strings, not {key!r}")
    return dict(section)


def _renamed(body: Any, keys: Mapping[str, str | None], path: str) -> Any:
    """A resource's or output's CFN keys as HOT's; an unknown key is refused naming it."""
    if not isinstance(body, Mapping):
        return body  # the HOT parser names the problem (as resources.NAME)
    out = {}
    for key, value in body.items():
        if key not in keys:
            raise TemplateError(at(path, key), f"unknown key; allowed: {', '.join(keys)}")
        hot = keys[key]
        if hot is not None:
            out[hot] = value
    return out


def _parameter(name: str, body: Any) -> dict[str, Any]:
    """A CFN parameter declaration as HOT's: its type, default, NoEcho and constraints."""
    path = f"Parameters.{name}"
    if not isinstance(body, Mapping):
        raise TemplateError(path, f"expected a map with at least 'Type', got {describe(body)}")
    for key in body:
        if key not in _PARAMETER_KEYS:
            raise TemplateError(at(path, key), f"unknown key; allowed: {', '.join(_PARAMETER_KEYS)}")
    ptype = body.get("Type")
    if ptype not in _PARAMETER_TYPES:
        raise TemplateError(at(path, "Type"), f"must be one of {', '.join(_PARAMETER_TYPES)}")
    hot: dict[str, Any] = {"type": _PARAMETER_TYPES[ptype]}
    if "Default" in body:
        hot["default"] = body["Default"]
    for cfn_key, hot_key in (("Description", "description"), ("Label", "label")):
        if cfn_key in body:
            hot[hot_key] = body[cfn_key]
    hot["hidden"] = str(body.get("NoEcho", "false")).lower() == "true"  # Heat's reading of NoEcho
    constraints = _constraints(body, path)
    if constraints:
        hot["constraints"] = constraints
    return hot


def _constraints(body: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    """Heat's order: range, length, allowed values, pattern; each with ConstraintDescription."""
    described = {"description": body["ConstraintDescription"]} if "ConstraintDescription" in body else {}
    out = []
    for kind, low, high in (("range", "MinValue", "MaxValue"), ("length", "MinLength", "MaxLength")):
        bounds = {k: _number(body[c], at(path, c)) for k, c in (("min", low), ("max", high)) if c in body}
        if bounds:
            out.append({kind: bounds, **described})
    for kind, key in (("allowed_values", "AllowedValues"), ("allowed_pattern", "AllowedPattern")):
        if key in body:
            out.append({kind: body[key], **described})
    return out


def _number(value: Any, path: str) -> int | float:
    """A bound written as a number or a numeric string (CFN's JSON often quotes them)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                pass
    raise TemplateError(path, f"expected a number, got {describe(value)}")


def _mappings(section: Any) -> dict[str, Any]:
    """``Mappings``: name -> key -> map of values, checked to have that shape."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise TemplateError("Mappings", f"expected a map of name -> map, got {describe(section)}")
    for name, keys in section.items():
        if not isinstance(keys, Mapping):
            raise TemplateError(at("Mappings", name), f"expected a map of key -> map, got {describe(keys)}")
        for key, values in keys.items():
            if not isinstance(values, Mapping):
                where = at(at("Mappings", name), key)
                raise TemplateError(where, f"expected a map of name -> value, got {describe(values)}")
    return dict(section)


_HOT_SECTIONS = {v: k for k, v in _SECTIONS.items()} | {"conditions": "Conditions"}
_HOT_KEYS = {v: k for k, v in (_RESOURCE_KEYS | _OUTPUT_KEYS).items() if v is not None}
_HOT_PARAMETER_KEYS = {"type": "Type", "default": "Default", "constraints": None}


def cfn_path(path: str, data: Mapping[str, Any]) -> str:
    """*path* (HOT's spelling, ``resources.web.properties.x``) as the CFN template spells it."""
    head, dot, rest = path.partition(".")
    section = _HOT_SECTIONS.get(head)
    if section is None or not dot:
        return path
    names = sorted(data.get(section) or {}, key=len, reverse=True)  # a name may hold a dot
    name = next((n for n in names if re.match(re.escape(n) + r"($|[.\[])", rest)), None)
    if name is None:
        return f"{section}.{rest}"
    found = re.match(r"\.([^.\[]+)(.*)", rest[len(name) :])
    key, below = found.groups() if found else ("", "")
    renamed = _HOT_PARAMETER_KEYS.get(key) if section == "Parameters" else _HOT_KEYS.get(key)
    if renamed is None:
        return f"{section}.{rest}"
    return f"{section}.{name}.{renamed}{below}"


def cfn_warning(warning: str, data: Mapping[str, Any]) -> str:
    """A parse warning (``path: what``) with its path as the CFN template spells it."""
    path, sep, rest = warning.partition(": ")
    return f"{cfn_path(path, data)}{sep}{rest}" if sep else warning


def resource_body(template: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """Resource *name* of a stored template (HOT or CFN) with HOT's keys (``metadata``,
    ``description``), or an empty map; for what is read of a template without parsing it."""
    if format_key(template) is None:
        body = (template.get("resources") or {}).get(name)
        return body if isinstance(body, Mapping) else {}
    body = (template.get("Resources") or {}).get(name)
    if not isinstance(body, Mapping):
        return {}
    return {k.lower() if k in ("Metadata", "Description") else k: v for k, v in body.items()}
