"""The CloudFormation functions Heat accepts in HOT templates of the oldest versions.

Heat's 2013-05-23 HOT takes ``Ref``, ``Fn::Join``, ``Fn::Split``, ``Fn::Replace``,
``Fn::Base64``, ``Fn::Select``, ``Fn::ResourceFacade`` and ``Fn::GetAZs``; 2014-10-16 and
2015-04-30 keep ``Fn::Select`` only; later versions none. ``desugar`` rewrites the ones with
a HOT equivalent into it before the template is checked (``Ref`` is ``get_param`` of a
parameter, else ``get_resource``), so dependencies and evaluation are HOT's own;
``Fn::Select`` and ``Fn::Split`` are functions (``transforms``) within their versions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from control.hot.errors import TemplateError, at
from control.hot.parameters import PSEUDO_PARAMETERS

OLDEST = "2013-05-23"
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
_FACADE = {"Metadata": "metadata", "DeletionPolicy": "deletion_policy", "UpdatePolicy": "update_policy"}


def removed(name: str, version: str) -> str | None:
    """Why CFN function *name* cannot be called in a template of *version* (None: it can)."""
    last = UNTIL.get(name)
    if last is None:
        return f"function {name} is not supported (CloudFormation-format templates are not; use HOT)"
    if version > last:
        hot = _INSTEAD.get(name, "a HOT function")
        return (
            f"function {name} is only in heat_template_version {OLDEST}"
            + (f" to {last}" if last != OLDEST else "")
            + f" (Heat's rule); this template is {version}: use {hot}"
        )
    if name == "Fn::MemberListToMap":
        return "function Fn::MemberListToMap is not supported"
    return None


def desugar(node: Any, version: str, names: tuple[Collection[str], Collection[str]], path: str) -> Any:
    """*node* with each CFN call that has a HOT equivalent written as it, in a 2013-05-23 template.

    *names*: the template's parameters and resources, which ``Ref`` tells apart.
    """
    if version != OLDEST:
        return node
    if isinstance(node, list):
        return [desugar(v, version, names, at(path, i)) for i, v in enumerate(node)]
    if not isinstance(node, Mapping):
        return node
    if len(node) == 1:
        ((key, args),) = node.items()
        if isinstance(key, str) and key in _REWRITES:
            return _REWRITES[key](desugar(args, version, names, at(path, key)), names, at(path, key))
    return {k: desugar(v, version, names, at(path, k)) for k, v in node.items()}


def _ref(args: Any, names: tuple[Collection[str], Collection[str]], path: str) -> Any:
    parameters, resources = names
    if not isinstance(args, str):
        raise TemplateError(path, "Ref: expects a parameter or resource name")
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


def select(args: Any, path: str) -> Any:
    """Fn::Select: [index, list] (the item; '' out of range) or [key, map] (the value; '' if absent)."""
    index, collection = args
    if collection is None or collection in ("", [], {}):
        return ""
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
