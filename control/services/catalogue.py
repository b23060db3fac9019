"""What templates may use, as Heat's API describes it: validate, resource types, template versions, functions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from control import hot
from control.errors import BadRequestError, NotFoundError
from control.hot.cfn import AWS_FORMAT, CFN_ONLY, CONDITION_ONES, UNTIL
from control.hot.cfnformat import FORMATS
from control.hot.functions import CONDITION_ONLY, SINCE
from control.hot.versions import DATES, RELEASES
from control.resources.validate import check_definition
from control.services.stack_request import parse_request

_PARAM_TYPES = {
    "string": "String",
    "number": "Number",
    "json": "Json",
    "comma_delimited_list": "CommaDelimitedList",
    "boolean": "Boolean",
}
_PROP_TYPES = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "map": "map",
    "list": "list",
    "any": "any",
}
#: One line on each function, as Heat's function list gives it.
FUNCTION_HELP = {
    "get_param": "A function for resolving parameter references.",
    "get_resource": "A function for resolving resource references.",
    "get_attr": "A function for resolving resource attributes.",
    "get_file": "A function for including a file inline.",
    "str_replace": "A function for performing string substitutions.",
    "str_replace_strict": "A function for performing string substitutions; every key must be found.",
    "str_replace_vstrict": "A function for performing string substitutions; keys must be found and values not empty.",
    "list_join": "A function for joining lists of strings.",
    "digest": "A function for performing digest operations.",
    "repeat": "A function for iterating over a list of items.",
    "str_split": "A function for splitting delimited strings into a list.",
    "map_merge": "A function for merging maps.",
    "map_replace": "A function for performing substitutions on maps.",
    "list_concat": "A function for concatenating lists.",
    "list_concat_unique": "A function for concatenating lists, dropping repeated items.",
    "contains": "A function for checking whether a value is in a sequence.",
    "if": "A function to return a value based on a condition.",
    "equals": "A function for comparing whether two values are equal.",
    "not": "A function that acts as a NOT operator on a condition.",
    "and": "A function that acts as an AND operator on conditions.",
    "or": "A function that acts as an OR operator on conditions.",
    "filter": "A function for filtering out values from lists.",
    "make_url": "A function for building URLs.",
}
#: The same for CloudFormation-format templates (control/hot/cfnformat.py).
CFN_HELP = {
    "Ref": "A function for resolving parameters or resource references.",
    "Fn::GetAtt": "A function for resolving resource attributes.",
    "Fn::Join": "A function for joining strings.",
    "Fn::Split": "A function for splitting strings.",
    "Fn::Replace": "A function for performing string substitutions.",
    "Fn::Base64": "A placeholder function for converting to base64 (its argument unchanged).",
    "Fn::Select": "A function for selecting an item from a list or map.",
    "Fn::GetAZs": "A function for retrieving the availability zones (none here).",
    "Fn::FindInMap": "A function for resolving keys in the template mappings.",
    "Fn::MemberListToMap": "A function to convert lists with enumerated keys and values to mapping.",
    "Fn::ResourceFacade": "A function for retrieving data in a parent provider template.",
    "Fn::If": "A function to return corresponding value based on condition evaluation.",
    "Fn::Equals": "A function for comparing whether two values are equal.",
    "Fn::Not": "A function that acts as a NOT operator on a condition.",
    "Fn::And": "A function that acts as an AND operator on conditions.",
    "Fn::Or": "A function that acts as an OR operator on conditions.",
}


def validate(body: Mapping[str, Any], max_bytes: int) -> dict[str, Any]:
    """Heat's template validation: Description, Parameters (Heat's keys) and Environment; 400 naming the problem."""
    req = parse_request(body, max_bytes)
    template = hot.parse_template(req.template, files=req.files, environment=req.environment)
    check_definition(template)
    params = {name: _parameter(p, req) for name, p in template.parameters.items()}
    env = {
        "parameters": dict(req.environment.parameters) | req.parameters,
        "parameter_defaults": dict(req.environment.parameter_defaults),
        "resource_registry": dict(req.environment.resource_registry),
        "encrypted_param_names": [],
        "event_sinks": [],
    }
    return {"Description": template.description or "No description", "Parameters": params, "Environment": env}


def _parameter(p: hot.ParameterDef, req: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "Type": _PARAM_TYPES.get(p.type, p.type),
        "Description": p.description or "",
        "Label": p.label or p.name,
        "NoEcho": "true" if p.hidden else "false",
    }
    if p.has_default:
        found["Default"] = p.default
    value = req.parameters.get(p.name, req.environment.parameters.get(p.name))
    if value is not None:
        found["Value"] = value
    for constraint in p.constraints:
        if "allowed_values" in constraint:
            found["AllowedValues"] = constraint["allowed_values"]
        if "allowed_pattern" in constraint:
            found["AllowedPattern"] = constraint["allowed_pattern"]
        for key, low, high in (("length", "MinLength", "MaxLength"), ("range", "MinValue", "MaxValue")):
            bounds = constraint.get(key)
            if isinstance(bounds, Mapping):
                found.update({low: bounds["min"]} if "min" in bounds else {})
                found.update({high: bounds["max"]} if "max" in bounds else {})
        if "description" in constraint:
            found["ConstraintDescription"] = constraint["description"]
    return found


def resource_types(name: str | None, with_description: bool) -> list[Any]:
    """The resource types templates may use; ``name`` keeps those it matches (a regular expression, as Heat)."""
    names = sorted(hot.TYPES)
    if name:
        try:
            pattern = re.compile(name)
        except re.error as e:
            raise BadRequestError(f"name: not a regular expression: {e}", where="name") from e
        names = [n for n in names if pattern.search(n)]
    if with_description:
        return [{"resource_type": n, "description": ""} for n in names]
    return names


def _spec(type_name: str) -> hot.TypeSpec:
    spec = hot.TYPES.get(type_name)
    if spec is None:
        raise NotFoundError(f"The Resource Type ({type_name}) could not be found.", where="type_name")
    return spec


def resource_schema(type_name: str) -> dict[str, Any]:
    """A type's properties and attributes in Heat's schema shape."""
    spec = _spec(type_name)
    props = {}
    for pname, prop in spec.properties.items():
        entry: dict[str, Any] = {
            "type": _PROP_TYPES.get(prop.type, prop.type),
            "required": prop.required,
            "update_allowed": prop.update != "replace",
            "immutable": False,
            "description": "accepted and ignored" if prop.ignored else "",
        }
        if prop.default is not None:
            entry["default"] = prop.default
        if prop.allowed:
            entry["constraints"] = [{"allowed_values": list(prop.allowed)}]
        props[pname] = entry
    attributes = {a: {"description": ""} for a in sorted(spec.attributes or ())}
    return {
        "resource_type": type_name,
        "properties": props,
        "attributes": attributes,
        "support_status": {"status": "SUPPORTED", "version": None, "message": None, "previous_status": None},
        "description": "",
    }


def type_template(type_name: str, template_type: str) -> dict[str, Any]:
    """Heat's generated template for a type: a parameter per property, an output per attribute."""
    spec = _spec(type_name)
    names = sorted(spec.properties)
    attrs = sorted(spec.attributes or ())
    res = type_name.rsplit("::", 1)[-1]  # Heat names the one resource after the type's last part
    if template_type == "hot":
        return {
            "heat_template_version": "2016-10-14",
            "description": f"Initial template of {type_name}",
            "parameters": {p: {"type": _param_type(spec, p), "description": p} for p in names},
            "resources": {res: {"type": type_name, "properties": {p: {"get_param": p} for p in names}}},
            "outputs": {a: {"description": a, "value": {"get_attr": [res, a]}} for a in attrs},
        }
    if template_type == "cfn":
        return {
            "HeatTemplateFormatVersion": "2012-12-12",
            "Description": f"Initial template of {type_name}",
            "Parameters": {p: {"Type": _PARAM_TYPES[_param_type(spec, p)], "Description": p} for p in names},
            "Resources": {res: {"Type": type_name, "Properties": {p: {"Ref": p} for p in names}}},
            "Outputs": {a: {"Description": a, "Value": {"Fn::GetAtt": [res, a]}} for a in attrs},
        }
    raise BadRequestError(
        f"Template type is not supported: {template_type!r}; hot or cfn", where="template_type"
    )


def _param_type(spec: hot.TypeSpec, prop: str) -> str:
    kind = spec.properties[prop].type
    return {
        "integer": "number",
        "number": "number",
        "boolean": "boolean",
        "list": "comma_delimited_list",
        "map": "json",
        "any": "json",
    }.get(kind, "string")


def template_versions() -> list[dict[str, Any]]:
    aliases = {
        date: [f"heat_template_version.{n}" for n, d in RELEASES.items() if d == date] for date in DATES
    }
    hot_ones = [
        {"version": f"heat_template_version.{d}", "type": "hot", "aliases": aliases[d]} for d in DATES
    ]
    return [
        *hot_ones,
        *({"version": f"{k}.{v}", "type": "cfn", "aliases": []} for k, (v, _) in FORMATS.items()),
    ]


def _cfn_functions(key: str, with_condition: bool) -> list[dict[str, str]]:
    """The functions of a CloudFormation-format template: Heat's table for its version key."""
    aws = FORMATS[key][0] == AWS_FORMAT
    names = [*UNTIL, *(n for n in CFN_ONLY if aws or n not in CONDITION_ONES)]
    shown = [n for n in names if with_condition or n == "Fn::If" or n not in CONDITION_ONES]
    return [{"functions": n, "description": CFN_HELP[n]} for n in sorted(shown)]


def template_functions(version: str, with_condition: bool) -> list[dict[str, str]]:
    """The functions a template of *version* (``heat_template_version.<date or release>``) may call."""
    prefix, _, name = version.partition(".")
    if prefix in FORMATS and name == FORMATS[prefix][0]:
        return _cfn_functions(prefix, with_condition)
    date = {**{d: d for d in DATES}, **RELEASES}.get(name) if prefix == "heat_template_version" else None
    if date is None:
        raise NotFoundError(f"The template version is invalid: {version}", where="template_version")
    found = []
    for fn in sorted(FUNCTION_HELP):
        if SINCE.get(fn, DATES[0]) > date or (fn in CONDITION_ONLY and not with_condition):
            continue
        found.append({"functions": fn, "description": FUNCTION_HELP[fn]})
    return found
