"""HOT intrinsic functions: evaluation, and the walks that static checks need.

A call is a map with exactly one key, that key a name in FUNCTIONS: ``{get_param: port}``.
``resolve`` evaluates calls bottom-up (arguments first) except ``if``, which evaluates only
the branch it picks. Errors are ``TemplateError(path of the call, "<function>: reason")``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol
from urllib import parse as urlparse

from control.hot.errors import TemplateError, at

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
CONDITION_FUNCTIONS = frozenset({"equals", "not", "and", "or", "contains", "get_param"})
# Functions that exist only in conditions: the `conditions` section, a resource's or an
# output's `condition`, and the first argument of `if` (Heat parses them nowhere else).
CONDITION_ONLY = frozenset({"equals", "not", "and", "or"})
# Heat/CFN names Anneal does not evaluate; every "Fn::..." key is one too.
UNSUPPORTED = frozenset({"Ref", "yaql", "resource_facade"})
DIGESTS = frozenset({"md5", "sha1", "sha224", "sha256", "sha384", "sha512"})
# Cap on what one repeat/str_replace may build, so a small template cannot exhaust memory.
MAX_RESULT = 8 * 1024 * 1024

_LIST_ARGS: dict[str, tuple[int, int | None]] = {
    "get_attr": (2, None),
    "list_join": (2, None),
    "digest": (2, 2),
    "str_split": (2, 3),
    "map_replace": (2, 2),
    "contains": (2, 2),
    "if": (3, 3),
    "equals": (2, 2),
    "and": (2, None),
    "or": (2, None),
    "filter": (2, 2),
    "map_merge": (0, None),
    "list_concat": (0, None),
    "list_concat_unique": (0, None),
}
_REPLACE_KEYS = frozenset({"template", "params"})
_MAP_ARGS: dict[str, tuple[frozenset[str], frozenset[str]]] = {  # required, allowed
    "str_replace": (_REPLACE_KEYS, _REPLACE_KEYS),
    "str_replace_strict": (_REPLACE_KEYS, _REPLACE_KEYS),
    "str_replace_vstrict": (_REPLACE_KEYS, _REPLACE_KEYS),
    "repeat": (frozenset({"for_each", "template"}), frozenset({"for_each", "template", "permutations"})),
    "make_url": (
        frozenset(),
        frozenset({"scheme", "username", "password", "host", "port", "path", "query", "fragment"}),
    ),
}


class Context(Protocol):
    """What evaluation needs from the stack being built."""

    def param(self, name: str) -> Any: ...
    def resource_id(self, name: str) -> Any: ...
    def attribute(self, name: str, attribute: str) -> Any: ...
    def file(self, path: str) -> str: ...
    def condition(self, name: str) -> bool: ...


def call_of(node: Any) -> tuple[str, Any] | None:
    """``(name, args)`` when ``node`` is a call of a supported function, else None."""
    if isinstance(node, Mapping) and len(node) == 1:
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
    if isinstance(node, Mapping):
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
    elif name == "not" and args is None:
        raise TemplateError(path, "not: expects a condition")


def resolve(node: Any, ctx: Context, path: str = "") -> Any:
    """Evaluate every intrinsic function in ``node``; returns new maps and lists."""
    call = call_of(node)
    if call is not None:
        name, args = call
        check_shape(name, args, path)
        if name == "if":
            return _if(args, ctx, path)
        resolved = resolve(args, ctx, at(path, name))
        check_shape(name, resolved, path)
        return _IMPLEMENTATIONS[name](resolved, ctx, path)
    if isinstance(node, Mapping):
        return {key: resolve(value, ctx, at(path, key)) for key, value in node.items()}
    if isinstance(node, list):
        return [resolve(value, ctx, at(path, i)) for i, value in enumerate(node)]
    return node


def evaluate_condition(expr: Any, ctx: Context, path: str = "") -> bool:
    """A condition's truth: a boolean, a condition name, or a condition function call."""
    return _truth(resolve(expr, ctx, path), ctx, path)


def _truth(value: Any, ctx: Context, path: str) -> bool:
    """The truth of an evaluated condition: a boolean, or the name of a condition."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return bool(ctx.condition(value))
    raise TemplateError(path, f"a condition must be true, false or a condition name, not {_show(value)}")


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _select(value: Any, keys: list[Any], missing: Any) -> Any:
    """Follow map keys and list indices (ints or digit strings); ``missing`` when it cannot."""
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, str | int):
            return missing
        if isinstance(value, Mapping):
            if key not in value:
                return missing
            value = value[key]
        elif isinstance(value, list):
            try:
                value = value[int(key)]
            except (ValueError, IndexError):
                return missing
        else:
            return missing
    return value


def _get_param(a: Any, ctx: Context, path: str) -> Any:
    """get_param: NAME or [NAME, key/index, ...]; a path that leads nowhere gives '' (Heat)."""
    name, keys = (a, []) if isinstance(a, str) else (a[0], list(a[1:]))
    if not isinstance(name, str):
        raise TemplateError(path, "get_param: the parameter name must be a string")
    return _select(ctx.param(name), keys, "")


def _get_resource(a: Any, ctx: Context, path: str) -> Any:
    """get_resource: NAME gives the resource's id."""
    return ctx.resource_id(a)


def _get_attr(a: Any, ctx: Context, path: str) -> Any:
    """get_attr: [RESOURCE, ATTRIBUTE, key/index, ...]; None when the attribute or path is absent."""
    if not (isinstance(a[0], str) and isinstance(a[1], str)):
        raise TemplateError(path, "get_attr: the resource and attribute names must be strings")
    return _select(ctx.attribute(a[0], a[1]), list(a[2:]), None)


def _get_file(a: Any, ctx: Context, path: str) -> Any:
    """get_file: PATH gives the text of that entry of the stack's files."""
    return ctx.file(a)


def _text(value: Any, name: str, path: str) -> str:
    """How a value is spliced into a string: JSON for maps and lists, str() for scalars."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, int | float):
        return str(value)
    raise TemplateError(path, f"{name}: cannot use {type(value).__name__} values in a string")


def _replace(template: str, params: Mapping[str, str]) -> tuple[str, set[str]]:
    """Splice params into template, longest key first, never rescanning spliced values."""
    # Each key only splits the text the longer keys left untouched: Heat's precedence.
    pieces: list[tuple[bool, str]] = [(False, template)]
    found: set[str] = set()
    for key in sorted(sorted(params), key=len, reverse=True):
        out: list[tuple[bool, str]] = []
        for is_value, piece in pieces:
            parts = [piece] if is_value else piece.split(key)
            if len(parts) > 1:
                found.add(key)
            for i, part in enumerate(parts):
                if i:
                    out.append((True, params[key]))
                out.append((is_value, part))
        pieces = out
    return "".join(piece for _, piece in pieces), found


def _str_replace(a: Any, ctx: Context, path: str, name: str = "str_replace") -> Any:
    """str_replace: {template, params}; maps/lists are spliced as JSON, null as ''."""
    template, params = a["template"], a["params"]
    if not isinstance(template, str):
        raise TemplateError(path, f"{name}: the template must be a string")
    if not isinstance(params, Mapping):
        raise TemplateError(path, f"{name}: params must be a map")
    texts: dict[str, str] = {}
    for key, value in params.items():
        if not isinstance(key, str) or not key:
            raise TemplateError(path, f"{name}: param keys must be non-empty strings, not {key!r}")
        texts[key] = _text(value, name, path)
        if name == "str_replace_vstrict" and (value is None or texts[key] in ("", "[]", "{}")):
            raise TemplateError(path, f"{name}: param {key!r} is empty")
    size = len(template) + sum(template.count(k) * len(v) for k, v in texts.items())
    if size > MAX_RESULT:
        raise TemplateError(path, f"{name}: the result would exceed {MAX_RESULT} characters")
    result, found = _replace(template, texts)
    missing = sorted(set(texts) - found)
    if missing and name != "str_replace":
        raise TemplateError(path, f"{name}: params not found in the template: {', '.join(missing)}")
    return result


def _list_join(a: Any, ctx: Context, path: str) -> Any:
    """list_join: [DELIMITER, LIST, ...]; map/list items are JSON, null items ''."""
    delimiter, lists = a[0], a[1:]
    if not isinstance(delimiter, str):
        raise TemplateError(path, "list_join: the delimiter must be a string")
    items: list[Any] = []
    for value in lists:
        if value is None:
            continue
        if not isinstance(value, list):
            raise TemplateError(path, f"list_join: expects lists to join, not {_show(value)}")
        items.extend(value)
    return delimiter.join(_text(item, "list_join", path) for item in items)


def _digest(a: Any, ctx: Context, path: str) -> Any:
    """digest: [ALGORITHM, VALUE] gives the hex digest (md5, sha1, sha224 ... sha512)."""
    algorithm, value = a
    if not (isinstance(algorithm, str) and isinstance(value, str)):
        raise TemplateError(path, "digest: the algorithm and the value must be strings")
    if algorithm.lower() not in DIGESTS:
        raise TemplateError(path, f"digest: algorithm must be one of {', '.join(sorted(DIGESTS))}")
    # Heat hashes latin-1 bytes; keep its digests, and use UTF-8 where latin-1 cannot encode.
    try:
        data = value.encode("latin-1")
    except UnicodeEncodeError:
        data = value.encode("utf-8")
    return hashlib.new(algorithm.lower(), data, usedforsecurity=False).hexdigest()


def _substitute(node: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(node, str):
        for key, text in pairs:
            node = node.replace(key, text)
        return node
    if isinstance(node, Mapping):
        return {_substitute(k, pairs): _substitute(v, pairs) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(item, pairs) for item in node]
    return node


def _repeat(a: Any, ctx: Context, path: str) -> Any:
    """repeat: {for_each: {PLACEHOLDER: LIST or MAP keys}, template, permutations (default true)}."""
    for_each, permutations = a["for_each"], a.get("permutations", True)
    if not isinstance(permutations, bool):
        raise TemplateError(path, "repeat: permutations must be true or false")
    if not isinstance(for_each, Mapping) or not for_each:
        raise TemplateError(path, "repeat: for_each must be a map of placeholder -> list")
    keys, lists = [], []
    for key, given in for_each.items():
        items = list(given) if isinstance(given, Mapping) and permutations else given
        if not isinstance(key, str) or not isinstance(items, list | None):
            raise TemplateError(path, f"repeat: for_each.{key} must be a list")
        keys.append(key)
        lists.append([_text(v, "repeat", path) for v in items or []])
    if not permutations and len({len(v) for v in lists}) > 1:
        raise TemplateError(path, "repeat: with permutations false, the lists must be as long")
    count = 1
    for values in lists:
        count = count * len(values) if permutations else len(values)
    if count * len(json.dumps(a["template"], default=str)) > MAX_RESULT:
        raise TemplateError(path, f"repeat: the result would exceed {MAX_RESULT} characters")
    combos = itertools.product(*lists) if permutations else zip(*lists, strict=True)
    return [_substitute(a["template"], list(zip(keys, combo, strict=True))) for combo in combos]


def _str_split(a: Any, ctx: Context, path: str) -> Any:
    """str_split: [DELIMITER, STRING] gives a list; [DELIMITER, STRING, INDEX] one item."""
    delimiter, text = a[0], a[1]
    if not isinstance(delimiter, str) or not delimiter:
        raise TemplateError(path, "str_split: the delimiter must be a non-empty string")
    if text is None:
        return None
    if not isinstance(text, str):
        raise TemplateError(path, f"str_split: expects a string to split, not {_show(text)}")
    parts = text.split(delimiter)
    if len(a) == 2:
        return parts
    try:
        return parts[int(a[2])]
    except (ValueError, TypeError, IndexError):
        raise TemplateError(path, f"str_split: index {_show(a[2])} is not in 0..{len(parts) - 1}") from None


def _map_merge(a: Any, ctx: Context, path: str) -> Any:
    """map_merge: [MAP, ...]; later maps win, nulls are skipped."""
    merged: dict[Any, Any] = {}
    for value in a:
        if value is not None and not isinstance(value, Mapping):
            raise TemplateError(path, f"map_merge: expects maps to merge, not {_show(value)}")
        merged.update(value or {})
    return merged


def _map_replace(a: Any, ctx: Context, path: str) -> Any:
    """map_replace: [MAP, {keys: {OLD: NEW}, values: {OLD: NEW}}]; renamed keys may not collide."""
    source, how = ({} if x is None else x for x in a)
    if not (isinstance(source, Mapping) and isinstance(how, Mapping)) or set(how) - {"keys", "values"}:
        raise TemplateError(path, "map_replace: expects [map, {keys: map, values: map}]")
    new_keys, new_values = how.get("keys") or {}, how.get("values") or {}
    if not (isinstance(new_keys, Mapping) and isinstance(new_values, Mapping)):
        raise TemplateError(path, "map_replace: keys and values must be maps")
    out: dict[Any, Any] = {}
    for key, value in source.items():
        new = key if new_keys.get(key) is None else new_keys[key]
        try:
            if (new != key and new in source) or new in out:
                raise TemplateError(path, f"map_replace: key replacement {new!r} collides with a key")
            out[new] = value
        except TypeError:
            raise TemplateError(path, f"map_replace: {_show(new)} cannot be a key") from None
        with contextlib.suppress(TypeError):  # an unhashable value has no replacement
            out[new] = new_values.get(value, value)
    return out


def _list_concat(a: Any, ctx: Context, path: str, unique: bool = False) -> Any:
    """list_concat: [LIST, ...] gives one list (nulls skipped); list_concat_unique drops repeats."""
    out: list[Any] = []
    for value in a:
        if value is not None and not isinstance(value, list):
            raise TemplateError(path, f"list_concat: expects lists, not {_show(value)}")
        for item in value or []:
            if not unique or item not in out:
                out.append(item)
    return out


def _contains(a: Any, ctx: Context, path: str) -> Any:
    """contains: [VALUE, LIST or STRING] is true when the value is in it."""
    value, sequence = a
    if isinstance(sequence, str) and isinstance(value, str):
        return value in sequence
    if not isinstance(sequence, list):
        raise TemplateError(path, f"contains: expects a list to look in, not {_show(sequence)}")
    return value in sequence


def _if(args: Any, ctx: Context, path: str) -> Any:
    """if: [CONDITION, VALUE_IF_TRUE, VALUE_IF_FALSE]; only the chosen value is evaluated."""
    if call_of(args) is not None:
        args = resolve(args, ctx, at(path, "if"))
        check_shape("if", args, path)
    chosen = 1 if evaluate_condition(args[0], ctx, at(at(path, "if"), 0)) else 2
    return resolve(args[chosen], ctx, at(at(path, "if"), chosen))


def _truths(a: Any, ctx: Context, path: str, name: str) -> Iterator[bool]:
    """and/or: [CONDITION, CONDITION, ...]; names refer to the conditions section."""
    for i, value in enumerate(a):
        yield _truth(value, ctx, at(at(path, name), i))


def _filter(a: Any, ctx: Context, path: str) -> Any:
    """filter: [VALUES, LIST] gives the list without the values."""
    values, sequence = a
    if not sequence:
        return sequence
    if not isinstance(sequence, list) or not isinstance(values or [], list):
        raise TemplateError(path, "filter: expects [values to remove, list]")
    return [item for item in sequence if item not in (values or [])]


def _make_url(a: Any, ctx: Context, path: str) -> Any:
    """make_url: {scheme, username, password, host, port, path, query, fragment} -> a quoted URL."""
    for key in ("scheme", "username", "password", "host", "path", "fragment"):
        if not isinstance(a.get(key, ""), str):
            raise TemplateError(path, f"make_url: {key} must be a string")
    scheme, port, query = a.get("scheme", ""), a.get("port", ""), a.get("query", {})
    if ":" in scheme:
        raise TemplateError(path, "make_url: scheme must not contain ':'")
    if not isinstance(query, Mapping):
        raise TemplateError(path, "make_url: query must be a map")
    if port not in ("", None):
        try:
            port = int(port)
        except (TypeError, ValueError):
            raise TemplateError(path, f"make_url: invalid port {_show(port)}") from None
        if not 0 < port <= 65535:
            raise TemplateError(path, f"make_url: port {port} is not in 1..65535")
    netloc = urlparse.quote(a.get("username", ""), safe="")
    if a.get("password"):
        netloc += ":" + urlparse.quote(a["password"], safe="")
    netloc += "@" if netloc else ""
    host = urlparse.quote(a.get("host", "").removeprefix("[").removesuffix("]"), safe=":")
    netloc += f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port not in ("", None) else ""
    encoded = urlparse.urlencode(query).replace("%2F", "/")
    return urlparse.urlunsplit(
        (scheme, netloc, urlparse.quote(a.get("path", "")), encoded, urlparse.quote(a.get("fragment", "")))
    )


_IMPLEMENTATIONS: dict[str, Callable[[Any, Context, str], Any]] = {
    "get_param": _get_param,
    "get_resource": _get_resource,
    "get_attr": _get_attr,
    "get_file": _get_file,
    "str_replace": _str_replace,
    "str_replace_strict": lambda a, c, p: _str_replace(a, c, p, "str_replace_strict"),
    "str_replace_vstrict": lambda a, c, p: _str_replace(a, c, p, "str_replace_vstrict"),
    "list_join": _list_join,
    "digest": _digest,
    "repeat": _repeat,
    "str_split": _str_split,
    "map_merge": _map_merge,
    "map_replace": _map_replace,
    "list_concat": _list_concat,
    "list_concat_unique": lambda a, c, p: _list_concat(a, c, p, unique=True),
    "contains": _contains,
    "equals": lambda a, c, p: a[0] == a[1],
    "not": lambda a, c, p: not _truth(a, c, at(p, "not")),
    "and": lambda a, c, p: all(_truths(a, c, p, "and")),
    "or": lambda a, c, p: any(_truths(a, c, p, "or")),
    "filter": _filter,
    "make_url": _make_url,
}
