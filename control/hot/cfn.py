"""The CloudFormation functions Heat accepts in HOT templates of the oldest versions.

Heat's 2013-05-23 HOT takes ``Ref``, ``Fn::Join``, ``Fn::Split``, ``Fn::Replace``,
``Fn::Base64``, ``Fn::Select``, ``Fn::ResourceFacade`` and ``Fn::GetAZs``; 2014-10-16 and
2015-04-30 keep ``Fn::Select`` only; later versions none. ``desugar`` rewrites the ones with
a HOT equivalent into it before the template is checked (``Ref`` is ``get_param`` of a
parameter, else ``get_resource``), so dependencies and evaluation are HOT's own;
``Fn::Select`` and ``Fn::Split`` are functions (``transforms``) within their versions.
CloudFormation-format templates (``cfnformat``) have these and ``Fn::GetAtt``,
``Fn::FindInMap``, ``Fn::MemberListToMap`` and, in 2010-09-09, the condition functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any

from control.hot.errors import TemplateError, at
from control.hot.functions import FUNCTIONS
from control.hot.parameters import PSEUDO_PARAMETERS
from control.hot.versions import CFN_VERSIONS

OLDEST = "2013-05-23"
AWS_FORMAT = "2010-09-09"
#: The last heat_template_version that has each CFN function (Heat's function tables).
UNTIL = {
    "Ref": OLDEST,
    "Fn::Join": OLDEST,
    "Fn::Split": OLDEST,
    "Fn::Replace": OLDEST,
    "Fn::Base64": OLDEST,
    "Fn::ResourceFacade": OLDEST,
    "Fn::GetAZs": OLDEST,
    "Fn::MemberListToMap": OLDEST,
    "Fn::Select": "2015-04-30",
}
#: What a later template writes instead.
_INSTEAD = {
    "Ref": "get_param or get_resource",
    "Fn::Join": "list_join",
    "Fn::Split": "str_split",
    "Fn::Replace": "str_replace",
    "Fn::Base64": "the value itself",
    "Fn::ResourceFacade": "resource_facade",
    "Fn::Select": "get_attr's path, or yaql",
}
#: Only in CloudFormation-format templates (AWS_FORMAT for the condition functions).
CFN_ONLY = {
    "Fn::GetAtt": "get_attr",
    "Fn::FindInMap": "a map parameter with get_param's path",
    "Fn::If": "if",
    "Fn::Equals": "equals",
    "Fn::Not": "not",
    "Fn::And": "and",
    "Fn::Or": "or",
}
#: HOT's own function names (not CloudFormation's ``Fn::``), which a CFN template does not call.
HOT_ONLY = frozenset(f for f in FUNCTIONS if not f.startswith("Fn::"))
CONDITION_ONES = frozenset({"Fn::If", "Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or"})
#: Ref of CloudFormation's pseudo parameters: ours, or Heat's fixed default for the region.
#: AWS::StackId is Heat's ARN of the stack: arn:openstack:heat::<project>:stacks/<name>/<id>.
AWS_PSEUDO = {
    "AWS::StackName": {"get_param": "OS::stack_name"},
    "AWS::StackId": {
        "list_join": [
            "",
            [
                "arn:openstack:heat::",
                {"get_param": "OS::project_id"},
                ":stacks/",
                {"get_param": "OS::stack_name"},
                "/",
                {"get_param": "OS::stack_id"},
            ],
        ]
    },
}
#: HOT's functions a CloudFormation-format template has under another name (Heat's would read
#: ``{get_param: x}`` there as plain data, never a call): refused, naming what to write instead.
_HOT_IN_CFN = {
    "get_param": "Ref",
    "get_resource": "Ref",
    "get_attr": "Fn::GetAtt",
    "list_join": "Fn::Join",
    "str_replace": "Fn::Replace",
    "str_split": "Fn::Split",
    "resource_facade": "Fn::ResourceFacade",
    "if": "Fn::If",
    "equals": "Fn::Equals",
    "not": "Fn::Not",
    "and": "Fn::And",
    "or": "Fn::Or",
}
AWS_REGION = "ap-southeast-1"
_FACADE = {"Metadata": "metadata", "DeletionPolicy": "deletion_policy", "UpdatePolicy": "update_policy"}


def removed(name: str, version: str) -> str | None:
    """Why CFN function *name* cannot be called in a template of *version* (None: it can)."""
    if version in CFN_VERSIONS:
        return _cfn_removed(name, version)
    last = UNTIL.get(name)
    if last is None and name in CFN_ONLY:
        return f"function {name} is only in CloudFormation-format templates; HOT has {CFN_ONLY[name]}"
    if last is None:
        return f"function {name} is not supported"
    if version > last:
        hot = _INSTEAD.get(name, "a HOT function")
        return (
            f"function {name} is only in heat_template_version {OLDEST}"
            + (f" to {last}" if last != OLDEST else "")
            + f" (Heat's rule); this template is {version}: use {hot}"
        )
    return None


def _cfn_removed(name: str, version: str) -> str | None:
    known = [*UNTIL, *(n for n in CFN_ONLY if version == AWS_FORMAT or n not in CONDITION_ONES)]
    if name in known:
        return None
    return f"function {name} is not supported in a {version} template; Heat's are {', '.join(sorted(known))}"


Names = tuple[Collection[str], Collection[str], Mapping[str, Any]]


def desugar(node: Any, version: str, names: Names, path: str) -> Any:
    """*node* with each CFN call that has a HOT equivalent written as it, in a 2013-05-23 or CFN template.

    *names*: the template's parameters and resources, which ``Ref`` tells apart, and its
    ``Mappings`` (CFN only).
    """
    if version != OLDEST and version not in CFN_VERSIONS:
        return node
    if isinstance(node, list):
        return [desugar(v, version, names, at(path, i)) for i, v in enumerate(node)]
    if not isinstance(node, Mapping):
        return node
    if len(node) == 1:
        ((key, args),) = node.items()
        if version in CFN_VERSIONS and key in HOT_ONLY:
            instead = _HOT_IN_CFN.get(key)
            said = f"write {instead}" if instead else "this format has no such function"
            raise TemplateError(
                at(path, key),
                f"{key} is a HOT function, not a CloudFormation-format template's ({said}; "
                "Heat would read the map as plain data, not a call)",
            )
        rewrite = _REWRITES.get(key) or (_CFN_REWRITES.get(key) if version in CFN_VERSIONS else None)
        if rewrite is not None and (version == AWS_FORMAT or key not in CONDITION_ONES):
            return rewrite(desugar(args, version, names, at(path, key)), names, at(path, key))
    return {k: desugar(v, version, names, at(path, k)) for k, v in node.items()}


def _ref(args: Any, names: Names, path: str) -> Any:
    parameters, resources, _ = names
    if not isinstance(args, str):
        raise TemplateError(path, "Ref: expects a parameter or resource name")
    if args in AWS_PSEUDO and args not in parameters:
        return AWS_PSEUDO[args]
    if args == "AWS::Region" and args not in parameters:
        return AWS_REGION
    if args in parameters or args in PSEUDO_PARAMETERS:
        return {"get_param": args}
    if args in resources:
        return {"get_resource": args}
    raise TemplateError(path, f"Ref: {args!r} is neither a parameter nor a resource of this template")


def _replace(args: Any, names: Any, path: str) -> Any:
    if not (isinstance(args, list) and len(args) == 2 and isinstance(args[0], Mapping)):
        raise TemplateError(path, "Fn::Replace: expects [{token: value, ...}, text]")
    return {"str_replace": {"template": args[1], "params": args[0]}}


def _facade(args: Any, names: Any, path: str) -> Any:
    if not isinstance(args, str) or args not in _FACADE:
        raise TemplateError(path, f"Fn::ResourceFacade: expects one of {', '.join(_FACADE)}")
    return {"resource_facade": _FACADE[args]}


_REWRITES: dict[str, Callable[[Any, Any, str], Any]] = {
    "Ref": _ref,
    "Fn::Join": lambda a, n, p: {"list_join": a},
    "Fn::Replace": _replace,
    "Fn::Base64": lambda a, n, p: a,  # Heat's returns its argument unchanged
    "Fn::ResourceFacade": _facade,
    "Fn::GetAZs": lambda a, n, p: [],  # no compute service here: no availability zones
}


def _get_att(args: Any, names: Any, path: str) -> Any:
    if not (isinstance(args, list) and len(args) == 2):
        raise TemplateError(path, "Fn::GetAtt: expects [resource_name, attribute]")
    return {"get_attr": args}


def _find_in_map(args: Any, names: Names, path: str) -> Any:
    """Looked up now when the keys are written out; else a call given the map itself."""
    if not (isinstance(args, list) and len(args) == 3):
        raise TemplateError(path, "Fn::FindInMap: expects [mapping, key, name]")
    mapname, key, name = args
    mappings = names[2]
    if not isinstance(mapname, str) or mapname not in mappings:
        raise TemplateError(path, f"Fn::FindInMap: {mapname!r} is not in Mappings")
    if isinstance(key, str | int) and isinstance(name, str | int):
        return find_in_map([mappings[mapname], key, name], path)
    return {"Fn::FindInMap": [mappings[mapname], key, name]}


def find_in_map(args: Any, path: str) -> Any:
    """Fn::FindInMap on [the mapping, key, name]: the value, or an error naming what is missing."""
    mapping, key, name = args
    values = mapping.get(str(key)) if isinstance(mapping, Mapping) else None
    if not isinstance(values, Mapping):
        raise TemplateError(path, f"Fn::FindInMap: the mapping has no key {key!r}")
    if str(name) not in values:
        raise TemplateError(path, f"Fn::FindInMap: key {key!r} of the mapping has no {name!r}")
    return values[str(name)]


def _condition_args(name: str, low: int, high: int | None) -> Callable[[Any, Any, str], Any]:
    def rewrite(args: Any, names: Any, path: str) -> Any:
        if not isinstance(args, list) or len(args) < low or (high is not None and len(args) > high):
            count = f"{low}" if low == high else f"at least {low}"
            raise TemplateError(path, f"Fn::{name.capitalize()}: expects a list of {count}")
        return {name: args[0] if name == "not" else args}

    return rewrite


_CFN_REWRITES: dict[str, Callable[[Any, Any, str], Any]] = {
    "Fn::GetAtt": _get_att,
    "Fn::FindInMap": _find_in_map,
    "Fn::If": _condition_args("if", 3, 3),
    "Fn::Equals": _condition_args("equals", 2, 2),
    "Fn::Not": _condition_args("not", 1, 1),
    "Fn::And": _condition_args("and", 2, None),
    "Fn::Or": _condition_args("or", 2, None),
}


def member_list_to_map(args: Any, path: str) -> Any:
    """Fn::MemberListToMap: [key_name, value_name, ['.member.0.<key_name>=k', ...]] -> {k: v}."""
    keyname, valuename, members = args
    if not (isinstance(keyname, str) and isinstance(valuename, str)):
        raise TemplateError(path, "Fn::MemberListToMap: the key and value names must be strings")
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise TemplateError(path, "Fn::MemberListToMap: the member list must be a list of strings")
    pairs: dict[str, dict[str, str]] = {}
    for member in members:
        field, _, value = member.partition("=")
        parts = field.rsplit(".", 2)  # '.member', index, field name
        if len(parts) == 3 and parts[2] in (keyname, valuename):
            pairs.setdefault(parts[1], {})[parts[2]] = value
    return {p[keyname]: p.get(valuename) for _, p in sorted(pairs.items()) if keyname in p}


def select(args: Any, path: str) -> Any:
    """Fn::Select: [index, list] (the item; '' out of range) or [key, map] (the value; '' if absent)."""
    index, collection = args
    if collection is None or collection in ("", [], {}):
        return ""
    if isinstance(collection, str):  # Heat reads a string as JSON (an attribute may be one)
        try:
            collection = json.loads(collection)
        except ValueError:
            raise TemplateError(
                path, "Fn::Select: a string to select from must be a JSON list or map"
            ) from None
    if isinstance(collection, Mapping):
        if not isinstance(index, str):
            raise TemplateError(path, "Fn::Select: a map's key is a string")
        return collection.get(index, "")
    if not isinstance(collection, list):
        raise TemplateError(path, "Fn::Select: expects a list or a map to select from")
    try:
        position = int(index)
    except (TypeError, ValueError):
        raise TemplateError(path, f"Fn::Select: index {index!r} is not a number") from None
    return collection[position] if 0 <= position < len(collection) else ""
