"""Equal parts of a template's resources kept once.

A generated template repeats itself: a million deployments each carry ``{"get_resource":
"cfg"}``, the same type name, the same input maps. Decoded, every copy is its own dict and
string (1.1 KB a deployment of the scale bench's template), and the parsed definition keeps
them for as long as the stack steps. ``Shared.tree`` rebuilds a resource's sections so that
equal strings, calls, maps and lists are one object.

A request's template is kept once from the start: ``Shared.decoded`` is a JSON decoder's object
hook, so a stack's body (``control/api/body.py``) is built shared as it is decoded, and its
template is stored and parsed as it came (``services/stack_request.py`` ``stored_form``; one that
is not plain JSON is made so by ``definition.plain``, shared too). No unshared copy of a big
template is ever whole in memory (at a million deployments: 1.5 GB each).

The parsed template is immutable (nothing writes into a definition), which is what makes
sharing invisible to its readers; the rebuilt tree never aliases the input's containers.
Nesting is bounded by the loader (``loader.MAX_DEPTH``), so the walk recurses.
"""

from __future__ import annotations

import json
import operator
from typing import Any

#: Scalars compared by value (and type: 1 and True stay apart); a float by its repr, so that
#: 0.0 and -0.0 do too. Strings have their own memo.
_BY_VALUE = (int, bool, type(None))


class Shared:
    """One template's memo of canonical parts (dropped with the parse that made it).

    Canonical parts are equal exactly when they are the same object, so a map or a list is known
    by its parts' ids. The memo keeps only the hash of those ids, not a tuple of them (that tuple
    and its ints were 600-800 B a deployment at the parse's peak, more than what is kept), and a
    hit is checked part by part: on the rare hash that two different parts share, the later is
    simply not shared.
    """

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._scalars: dict[tuple[type, Any], Any] = {}
        self._memo: dict[int, Any] = {}

    def tree(self, node: Any) -> Any:
        """*node* rebuilt from canonical parts: equal to it, sharing what earlier trees hold."""
        kind = type(node)
        if kind is str:
            return self._strings.setdefault(node, node)
        if kind is dict:
            return self._kept({self.tree(k): self.tree(v) for k, v in node.items()})
        if kind is list:
            return self._kept([self.tree(v) for v in node])
        if kind in _BY_VALUE:
            return self._scalars.setdefault((kind, node), node)
        if kind is float:
            return self._scalars.setdefault((kind, repr(node)), node)
        return node  # anything else (a Secret, a tuple ...) is only itself

    def decoded(self, obj: Any) -> Any:
        """``json.loads(object_pairs_hook=...)`` behind any check that makes *obj* from the pairs: the
        object kept once. Its members were decoded by the same hook, so an object among them is
        already canonical; strings, numbers and arrays are made so here, in place (*obj* is the
        decoder's fresh dict). Its keys need nothing: the decoder keeps each key text once a
        document. Anything but a dict (a Secret the check made) is only itself."""
        if type(obj) is not dict:
            return obj
        strings = self._strings
        for k, v in obj.items():  # values replaced, none added: the iteration stays valid
            kind = type(v)
            if kind is str:
                obj[k] = strings.setdefault(v, v)
            elif kind is not dict:
                obj[k] = self._member(v)
        return self._kept(obj)

    def _member(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict:  # decoded (so made canonical) by this hook already
            return value
        if kind is list:
            return self._kept([self._member(v) for v in value])
        return self.tree(value)

    def _kept(self, built: dict[Any, Any] | list[Any]) -> Any:
        """*built* (its parts canonical), or the equal map or list kept before it."""
        kind = type(built)
        if isinstance(built, dict):
            key = hash((len(built), *map(id, built), *map(id, built.values())))
        else:
            key = hash((-1, *map(id, built)))
        found = self._memo.setdefault(key, built)
        if found is built or (type(found) is kind and _same_parts(found, built)):
            return found
        return built  # another part with the same hash: this one is not shared


def _same_parts(kept: Any, built: Any) -> bool:
    if len(kept) != len(built) or not all(map(operator.is_, kept, built)):
        return False
    return type(kept) is not dict or all(map(operator.is_, kept.values(), built.values()))


def loads(text: str | bytes, check: Any = dict, **options: Any) -> Any:
    """``json.loads`` of *text* whose equal objects, arrays and strings are one object; *check*
    makes each object from its pairs first (refusing a duplicate key, or reviving a Secret).
    The top-level value is its own object, so a caller may add to it without touching a part."""
    shared = Shared()
    value = json.loads(text, object_pairs_hook=lambda pairs: shared.decoded(check(pairs)), **options)
    kind = type(value)
    return dict(value) if kind is dict else list(value) if kind is list else value
