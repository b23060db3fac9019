"""Equal parts of a template's resources kept once.

A generated template repeats itself: a million deployments each carry ``{"get_resource":
"cfg"}``, the same type name, the same input maps. Decoded, every copy is its own dict and
string (1.1 KB a deployment of the scale bench's template), and the parsed definition keeps
them for as long as the stack steps. ``Shared.tree`` rebuilds a resource's sections so that
equal strings, calls, maps and lists are one object.

The parsed template is immutable (nothing writes into a definition), which is what makes
sharing invisible to its readers; the rebuilt tree never aliases the input's containers.
Nesting is bounded by the loader (``loader.MAX_DEPTH``), so the walk recurses.
"""

from __future__ import annotations

from typing import Any

#: Scalars compared by value (and type: 1 and True stay apart); a float by its repr, so that
#: 0.0 and -0.0 do too. Strings have their own memo.
_BY_VALUE = (int, bool, type(None))


class Shared:
    """One template's memo of canonical parts (dropped with the parse that made it)."""

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._memo: dict[tuple[Any, ...], Any] = {}

    def tree(self, node: Any) -> Any:
        """*node* rebuilt from canonical parts: equal to it, sharing what earlier trees hold."""
        kind = type(node)
        if kind is str:
            return self._strings.setdefault(node, node)
        built: Any
        if kind is dict:
            built = {self.tree(k): self.tree(v) for k, v in node.items()}
            # Canonical parts are equal exactly when they are the same object.
            key: tuple[Any, ...] = ("map", *map(id, built), *map(id, built.values()))
        elif kind is list:
            built = [self.tree(v) for v in node]
            key = ("list", *map(id, built))
        elif kind in _BY_VALUE:
            built, key = node, (kind, node)
        elif kind is float:
            built, key = node, (kind, repr(node))
        else:  # anything else (a Secret, a tuple ...) is only itself
            built, key = node, ("object", id(node))
        return self._memo.setdefault(key, built)
