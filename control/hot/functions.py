"""HOT intrinsic functions: their names, versions and argument shapes, and walks over calls.

A call is a map with exactly one key, that key a name in FUNCTIONS: ``{get_param: port}``.
This is what static checks need; ``evaluation`` evaluates calls against a stack, and
``transforms`` holds the functions that build a value from their arguments alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from control.hot.errors import TemplateError, at
from control.hot.taint import is_mapping

FUNCTIONS = frozenset(
    {
        "get_param",
        "get_resource",
        "get_attr",
        "get_file",
        "str_replace",
        "str_replace_strict",
        "str_replace_vstrict",
        "list_join",
        "digest",
        "repeat",
        "str_split",
        "map_merge",
        "map_replace",
        "list_concat",
        "list_concat_unique",
        "contains",
        "if",
        "equals",
        "not",
        "and",
        "or",
        "filter",
        "make_url",
        "resource_facade",
        "yaql",
        # CloudFormation's, in the oldest HOT versions only (cfn.UNTIL); the others are rewritten.
        "Fn::Select",
        "Fn::Split",
        "Fn::MemberListToMap",
        "Fn::FindInMap",  # CloudFormation-format only, when its keys are computed
    }
)
# The heat_template_version that introduced each function (Heat's per-version function
# tables); a template of an older version may not call it. Others exist since 2013-05-23.
SINCE: dict[str, str] = {
    "digest": "2015-04-30",
    "repeat": "2015-04-30",
    "str_split": "2015-10-15",
    "map_merge": "2016-04-08",
    "map_replace": "2016-10-14",
    "yaql": "2016-10-14",
    "if": "2016-10-14",
    "equals": "2016-10-14",
    "not": "2016-10-14",
    "and": "2016-10-14",
    "or": "2016-10-14",
    "filter": "2017-02-24",
    "str_replace_strict": "2017-02-24",
    "make_url": "2017-09-01",
    "list_concat": "2017-09-01",
    "list_concat_unique": "2017-09-01",
    "str_replace_vstrict": "2017-09-01",
    "contains": "2017-09-01",
}
# The only functions a `conditions` entry or an inline condition may call (Heat's rule).
CONDITION_FUNCTIONS = frozenset({"equals", "not", "and", "or", "contains", "get_param", "Fn::FindInMap"})
# Functions that exist only in conditions: the `conditions` section, a resource's or an
# output's `condition`, and the first argument of `if` (Heat parses them nowhere else).
CONDITION_ONLY = frozenset({"equals", "not", "and", "or"})
# Heat/CFN names Anneal does not evaluate; every "Fn::..." key is one too.
UNSUPPORTED = frozenset({"Ref"})
#: What ``resource_facade`` may read of the resource that made a nested stack.
FACADE_KEYS = ("metadata", "deletion_policy", "update_policy")

_LIST_ARGS: dict[str, tuple[int, int | None]] = {
    "get_attr": (2, None),
    "list_join": (2, None),
    "digest": (2, 2),
    "str_split": (2, 3),
    "map_replace": (2, 2),
    "contains": (2, 2),
    "if": (2, 3),  # two arguments since 2021-04-16 (checker.py): a false one drops its item
    "equals": (2, 2),
    "and": (2, None),
    "or": (2, None),
    "filter": (2, 2),
    "map_merge": (0, None),
    "list_concat": (0, None),
    "list_concat_unique": (0, None),
    "Fn::Select": (2, 2),
    "Fn::Split": (2, 2),
    "Fn::MemberListToMap": (3, 3),
    "Fn::FindInMap": (3, 3),
}
_REPLACE_KEYS = frozenset({"template", "params"})
_MAP_ARGS: dict[str, tuple[frozenset[str], frozenset[str]]] = {  # required, allowed
    "str_replace": (_REPLACE_KEYS, _REPLACE_KEYS),
    "str_replace_strict": (_REPLACE_KEYS, _REPLACE_KEYS),
    "str_replace_vstrict": (_REPLACE_KEYS, _REPLACE_KEYS),
    "repeat": (frozenset({"for_each", "template"}), frozenset({"for_each", "template", "permutations"})),
    "yaql": (frozenset({"expression"}), frozenset({"expression", "data"})),
    "make_url": (
        frozenset(),
        frozenset({"scheme", "username", "password", "host", "port", "path", "query", "fragment"}),
    ),
}


def call_of(node: Any) -> tuple[str, Any] | None:
    """``(name, args)`` when ``node`` is a call of a supported function, else None."""
    if is_mapping(node) and len(node) == 1:
        ((name, args),) = node.items()
        if isinstance(name, str) and name in FUNCTIONS:
            return name, args
    return None


def is_unsupported(key: Any) -> bool:
    """True for a Heat or CFN function name that Anneal does not evaluate."""
    return isinstance(key, str) and (key in UNSUPPORTED or key.startswith("Fn::"))


def walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every node below ``node`` (itself included) with its path, function arguments too."""
    yield path, node
    if is_mapping(node):
        for key, value in node.items():
            yield from walk(value, at(path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, at(path, i))


def calls(node: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """``(path, name, args)`` for every call in ``node``, outer calls before inner ones."""
    for where, sub in walk(node, path):
        call = call_of(sub)
        if call is not None:
            yield where, call[0], call[1]


def mentions(node: Any, name: str) -> bool:
    """Whether a map keyed *name* (a call of that function, if it is one) is anywhere in *node*:
    a walk that builds no paths, cheap enough for every resource the engine evaluates."""
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            if name in item:
                return True
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def references(node: Any) -> frozenset[str]:
    """Names of the resources that get_resource and get_attr in ``node`` refer to."""
    names: set[str] = set()
    for _, name, args in calls(node):
        if name == "get_resource" and isinstance(args, str):
            names.add(args)
        elif name == "get_attr" and isinstance(args, list) and args and isinstance(args[0], str):
            names.add(args[0])
    return frozenset(names)


def check_shape(name: str, args: Any, path: str) -> None:
    """Raise unless ``args`` has the form ``name`` takes (arguments that are calls pass)."""
    if call_of(args) is not None:
        return
    if name in _LIST_ARGS:
        low, high = _LIST_ARGS[name]
        if not isinstance(args, list) or len(args) < low or (high is not None and len(args) > high):
            count = f"{low}" if low == high else f"at least {low}" if high is None else f"{low} to {high}"
            raise TemplateError(path, f"{name}: expects a list of {count} arguments")
    elif name in _MAP_ARGS:
        required, allowed = _MAP_ARGS[name]
        if not isinstance(args, Mapping):
            raise TemplateError(path, f"{name}: expects a map with keys {', '.join(sorted(allowed))}")
        missing, extra = required - set(args), set(args) - allowed
        if missing or extra:
            unknown = sorted(map(str, extra))
            problem = f"misses {sorted(missing)}" if missing else f"has unknown keys {unknown}"
            raise TemplateError(path, f"{name}: the argument map {problem}")
    elif name in ("get_resource", "get_file") and not isinstance(args, str):
        raise TemplateError(path, f"{name}: expects a name (a string)")
    elif name == "get_param" and not (isinstance(args, str) or (isinstance(args, list) and args)):
        raise TemplateError(path, f"{name}: expects a parameter name or a list [name, key, ...]")
    elif name == "resource_facade" and args not in FACADE_KEYS:
        raise TemplateError(path, f"{name}: expects one of {', '.join(FACADE_KEYS)}")
    elif name == "not" and args is None:
        raise TemplateError(path, "not: expects a condition")
