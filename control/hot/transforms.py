"""The HOT functions that build a value from their arguments alone: strings, lists and maps.

Each takes the evaluated arguments (already of the shape ``check_shape`` accepts) and the
path of the call for its errors; none needs the stack. TRANSFORMS maps a name to one.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib import parse as urlparse

from control.hot import cfn, yaqlfn
from control.hot.budget import SLOT, Meter, current, meter
from control.hot.errors import TemplateError, show

DIGESTS = frozenset({"md5", "sha1", "sha224", "sha256", "sha384", "sha512"})


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


def _str_replace(a: Any, path: str, name: str = "str_replace") -> Any:
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
    # An upper bound: each occurrence of a key spliced, none of them rescanned.
    meter(path, name).add(len(template) + sum(template.count(k) * len(v) for k, v in texts.items()))
    result, found = _replace(template, texts)
    missing = sorted(set(texts) - found)
    if missing and name != "str_replace":
        raise TemplateError(path, f"{name}: params not found in the template: {', '.join(missing)}")
    return result


def _list_join(a: Any, path: str) -> Any:
    """list_join: [DELIMITER, LIST, ...]; map/list items are JSON, null items ''."""
    delimiter, lists = a[0], a[1:]
    if not isinstance(delimiter, str):
        raise TemplateError(path, "list_join: the delimiter must be a string")
    items: list[Any] = []
    for value in lists:
        if value is None:
            continue
        if not isinstance(value, list):
            raise TemplateError(path, f"list_join: expects lists to join, not {show(value)}")
        items.extend(value)
    counted, budget, texts = meter(path, "list_join"), current(), []
    for item in items:
        counted.add(len(delimiter) + budget.size(item))  # before a map or list is written as JSON
        texts.append(_text(item, "list_join", path))
    return delimiter.join(texts)


def _digest(a: Any, path: str) -> Any:
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


def _substitute(node: Any, pairs: list[tuple[str, str]], counted: Meter) -> Any:
    """The template with each placeholder replaced, every string's growth checked before it is built."""
    if isinstance(node, str):
        for key, text in pairs:
            counted.check(len(node) + node.count(key) * (len(text) - len(key)))
            node = node.replace(key, text)
        counted.add(len(node))
        return node
    counted.add(SLOT)
    if isinstance(node, Mapping):
        return {_substitute(k, pairs, counted): _substitute(v, pairs, counted) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(item, pairs, counted) for item in node]
    return node


def _repeat(a: Any, path: str) -> Any:
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
    counted = meter(path, "repeat")
    counted.add(count * SLOT)  # the list itself; each copy is counted as it is built
    combos = itertools.product(*lists) if permutations else zip(*lists, strict=True)
    return [_substitute(a["template"], list(zip(keys, combo, strict=True)), counted) for combo in combos]


def _str_split(a: Any, path: str) -> Any:
    """str_split: [DELIMITER, STRING] gives a list; [DELIMITER, STRING, INDEX] one item."""
    delimiter, text = a[0], a[1]
    if not isinstance(delimiter, str) or not delimiter:
        raise TemplateError(path, "str_split: the delimiter must be a non-empty string")
    if text is None:
        return None
    if not isinstance(text, str):
        raise TemplateError(path, f"str_split: expects a string to split, not {show(text)}")
    meter(path, "str_split").add(len(text) + SLOT * (text.count(delimiter) + 1))
    parts = text.split(delimiter)
    if len(a) == 2:
        return parts
    try:
        return parts[int(a[2])]
    except (ValueError, TypeError, IndexError):
        raise TemplateError(path, f"str_split: index {show(a[2])} is not in 0..{len(parts) - 1}") from None


def _map_merge(a: Any, path: str) -> Any:
    """map_merge: [MAP, ...]; later maps win, nulls are skipped."""
    merged: dict[Any, Any] = {}
    counted, budget = meter(path, "map_merge"), current()
    for value in a:
        if value is not None and not isinstance(value, Mapping):
            raise TemplateError(path, f"map_merge: expects maps to merge, not {show(value)}")
        counted.add(budget.size(value))
        merged.update(value or {})
    return merged


def _map_replace(a: Any, path: str) -> Any:
    """map_replace: [MAP, {keys: {OLD: NEW}, values: {OLD: NEW}}]; renamed keys may not collide."""
    source, how = ({} if x is None else x for x in a)
    if not (isinstance(source, Mapping) and isinstance(how, Mapping)) or set(how) - {"keys", "values"}:
        raise TemplateError(path, "map_replace: expects [map, {keys: map, values: map}]")
    new_keys, new_values = how.get("keys") or {}, how.get("values") or {}
    if not (isinstance(new_keys, Mapping) and isinstance(new_values, Mapping)):
        raise TemplateError(path, "map_replace: keys and values must be maps")
    budget = current()
    meter(path, "map_replace").add(budget.size(source) + budget.size(new_keys) + budget.size(new_values))
    out: dict[Any, Any] = {}
    for key, value in source.items():
        new = key if new_keys.get(key) is None else new_keys[key]
        try:
            if (new != key and new in source) or new in out:
                raise TemplateError(path, f"map_replace: key replacement {new!r} collides with a key")
            out[new] = value
        except TypeError:
            raise TemplateError(path, f"map_replace: {show(new)} cannot be a key") from None
        with contextlib.suppress(TypeError):  # an unhashable value has no replacement
            out[new] = new_values.get(value, value)
    return out


def _list_concat(a: Any, path: str, unique: bool = False) -> Any:
    """list_concat: [LIST, ...] gives one list (nulls skipped); list_concat_unique drops repeats."""
    out: list[Any] = []
    counted, budget, seen = meter(path, "list_concat"), current(), _Seen()
    for value in a:
        if value is not None and not isinstance(value, list):
            raise TemplateError(path, f"list_concat: expects lists, not {show(value)}")
        counted.add(budget.size(value))
        for item in value or []:
            if not unique or seen.first(item):
                out.append(item)
    return out


class _Seen:
    """Values met so far, found in constant time (a list scan made list_concat_unique quadratic)."""

    def __init__(self, values: Any = ()) -> None:
        self._keys = {_frozen(v) for v in values}

    def first(self, value: Any) -> bool:
        """True the first time a value equal to *value* is met."""
        key = _frozen(value)
        if key in self._keys:
            return False
        self._keys.add(key)
        return True

    def __contains__(self, value: Any) -> bool:
        return _frozen(value) in self._keys


def _frozen(value: Any) -> Any:
    """A hashable stand-in equal for equal values: maps as sets of items, lists as tuples."""
    if isinstance(value, Mapping):
        return ("map", frozenset((_frozen(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(_frozen(v) for v in value))
    return value


def _contains(a: Any, path: str) -> Any:
    """contains: [VALUE, LIST or STRING] is true when the value is in it."""
    value, sequence = a
    if isinstance(sequence, str) and isinstance(value, str):
        return value in sequence
    if not isinstance(sequence, list):
        raise TemplateError(path, f"contains: expects a list to look in, not {show(sequence)}")
    return value in sequence


def _filter(a: Any, path: str) -> Any:
    """filter: [VALUES, LIST] gives the list without the values."""
    values, sequence = a
    if not sequence:
        return sequence
    if not isinstance(sequence, list) or not isinstance(values or [], list):
        raise TemplateError(path, "filter: expects [values to remove, list]")
    meter(path, "filter").add(current().size(sequence))
    removed = _Seen(values or [])
    return [item for item in sequence if item not in removed]


def _make_url(a: Any, path: str) -> Any:
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
            raise TemplateError(path, f"make_url: invalid port {show(port)}") from None
        if not 0 < port <= 65535:
            raise TemplateError(path, f"make_url: port {port} is not in 1..65535")
    # Quoting makes each character at most three.
    meter(path, "make_url").add(3 * current().size(a))
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


TRANSFORMS: dict[str, Callable[[Any, str], Any]] = {
    "str_replace": _str_replace,
    "str_replace_strict": lambda a, p: _str_replace(a, p, "str_replace_strict"),
    "str_replace_vstrict": lambda a, p: _str_replace(a, p, "str_replace_vstrict"),
    "list_join": _list_join,
    "digest": _digest,
    "repeat": _repeat,
    "str_split": _str_split,
    "map_merge": _map_merge,
    "map_replace": _map_replace,
    "list_concat": _list_concat,
    "list_concat_unique": lambda a, p: _list_concat(a, p, unique=True),
    "contains": _contains,
    "filter": _filter,
    "make_url": _make_url,
    "yaql": yaqlfn.evaluate,
    "Fn::Select": cfn.select,
    "Fn::Split": _str_split,
    "Fn::MemberListToMap": cfn.member_list_to_map,
    "Fn::FindInMap": cfn.find_in_map,
}
