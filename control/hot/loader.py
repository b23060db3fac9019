"""Safe YAML loading with caps on size, nesting and alias expansion.

A document is scanned as a stream of events before it is built, so an alias bomb or a
deeply nested document is refused after reading only as much of it as proves the point.
Text that starts with ``{`` is read as JSON first, as Heat does: a JSON template of tens
of thousands of resources parses in a tenth of the time.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from control.hot.errors import TemplateError

#: Default cap on a template's or environment's text (Heat's default max_template_size);
#: `anneal serve --max-template-bytes` sets another.
MAX_TEMPLATE_BYTES = 512 * 1024
MAX_ALIASES = 100
MAX_DEPTH = 100
#: Least node count allowed after expanding aliases. The cap is this or one node per byte
#: of the size cap, whichever is larger: a document without aliases always fits (every
#: node takes at least one byte), so only alias expansion can reach it.
MAX_NODES = 1_000_000

# libyaml when present: ten times faster, and safe here because the scan caps nesting first.
_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE):  # type: ignore[misc]
    """SafeLoader that keeps timestamps as text, refuses types JSON cannot carry and duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """Refuse a key given twice in one mapping, naming it and its line, as Heat does.

        Keys a merge (``<<``) brings in may be given again: YAML says the explicit key wins.
        """
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)  # cached: built once, here or below
            try:
                again = key in seen
            except TypeError:
                continue  # an unhashable key: the base constructor refuses it
            if again:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return dict(super().construct_mapping(node, deep))


def _as_text(loader: Any, node: yaml.Node) -> str:
    return str(loader.construct_scalar(node))


def _refuse(loader: Any, node: yaml.Node) -> None:
    raise yaml.constructor.ConstructorError(
        None, None, f"the tag {node.tag} is not allowed here", node.start_mark
    )


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _as_text)
for _tag in ("set", "binary", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse)


def load_yaml(text: str, what: str, max_bytes: int = MAX_TEMPLATE_BYTES) -> Any:
    """Parse one YAML document of at most *max_bytes* safely; any problem is a TemplateError naming ``what``."""
    if not isinstance(text, str):
        raise TemplateError(what, f"expected YAML text, got {type(text).__name__}")
    size = len(text.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise TemplateError(what, f"is {size} bytes, more than the limit of {max_bytes}")
    try:
        with _collector_paused():
            if text.lstrip()[:1] == "{":
                try:
                    data = json.loads(text, object_pairs_hook=_unique)
                except (ValueError, RecursionError):
                    pass  # not JSON, or a key given twice: read as YAML, which says what and where
                else:
                    check_document(data, what)
                    return data
            _scan(text, what, max(MAX_NODES, max_bytes))
            return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as e:
        raise TemplateError(what, _describe(e)) from e
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as e:
        raise TemplateError(what, f"invalid YAML: {e}") from e


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, unless a key appears twice in it."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("duplicate key")
    return obj


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a document is built.

    Building a million nodes sets off a full collection over and over: a 12 MB template
    loads in 13 s with it and 3 s without. A document has no reference cycles to collect.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _describe(e: yaml.MarkedYAMLError) -> str:
    mark = e.problem_mark or e.context_mark
    problem = ", ".join(p for p in (e.context, e.problem) if p) or "invalid document"
    if mark is None:
        return f"invalid YAML: {problem}"
    return f"invalid YAML at line {mark.line + 1} column {mark.column + 1}: {problem}"


def _scan(text: str, what: str, max_nodes: int) -> None:
    """Refuse documents that nest too deep, use too many aliases or expand past *max_nodes*."""
    scan = _Scan(what, max_nodes)
    for event in yaml.parse(text, Loader=_BASE):
        scan.feed(event)


class _Scan:
    """Tracks open collections and each anchor's expanded size and height."""

    def __init__(self, what: str, max_nodes: int) -> None:
        self.what = what
        self.max_nodes = max_nodes
        self.anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded size, height)
        self.frames: list[list[Any]] = []  # open collections: [size, tallest child, anchor]
        self.aliases = self.nodes = 0

    def feed(self, event: Any) -> None:
        if isinstance(event, yaml.CollectionStartEvent):
            self.frames.append([1, 0, event.anchor])
            self.nodes += 1
            if len(self.frames) > MAX_DEPTH:
                raise self.limit(event, f"nests deeper than {MAX_DEPTH} levels")
            return
        if isinstance(event, yaml.CollectionEndEvent):
            size, tallest, anchor = self.frames.pop()
            self.node(event, size, tallest + 1, anchor)
        elif isinstance(event, yaml.ScalarEvent):
            self.nodes += 1
            self.node(event, 1, 0, event.anchor)
        elif isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise self.limit(event, f"uses more than {MAX_ALIASES} aliases")
            if event.anchor not in self.anchors:
                raise self.limit(event, f"alias *{event.anchor} is undefined or recursive")
            size, height = self.anchors[event.anchor]
            self.nodes += size
            if len(self.frames) + height > MAX_DEPTH:
                raise self.limit(event, f"nests deeper than {MAX_DEPTH} levels through an alias")
            self.node(event, size, height, None)

    def node(self, event: Any, size: int, height: int, anchor: str | None) -> None:
        """Account for a finished node of ``size`` expanded nodes and ``height`` levels."""
        if self.nodes > self.max_nodes:
            raise self.limit(event, f"expands to more than {self.max_nodes} nodes through aliases")
        if anchor is not None:
            self.anchors[anchor] = (size, height)
        if self.frames:
            self.frames[-1][0] += size
            self.frames[-1][1] = max(self.frames[-1][1], height)

    def limit(self, event: Any, problem: str) -> TemplateError:
        mark = event.start_mark
        return TemplateError(self.what, f"{problem} (line {mark.line + 1} column {mark.column + 1})")


def check_document(data: Any, what: str) -> None:
    """Refuse an already-parsed document nested deeper than YAML input may be.

    Its size is not checked here: a document given as an object came in a request body
    under the request cap, or from YAML text under the node cap.
    """
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth >= MAX_DEPTH:
            raise TemplateError(what, f"nests deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)
