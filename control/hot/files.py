"""The files a stack carries: how ``get_file`` and template types name them, and which a child needs.

A request's ``files`` map keys to texts. The CLI keys a file by its path relative to the
top template's directory (``nested/server.yaml``), or by the path as written when that is
absolute (``/srv/t.yaml``, ``~/t.yaml``) or a URL (``file:///srv/t.yaml``, as
python-heatclient sends). A template inside the files names others relative to its own
directory; ``canonical`` rewrites those names to keys before the template is parsed, so
every stack, nested or not, looks names up the same way (``lookup``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urljoin

#: A type naming one of these is a template resource (Heat's rule: ``.yaml`` or ``.template``).
TEMPLATE_SUFFIXES = (".yaml", ".template")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_absolute(ref: str) -> bool:
    """A URL, or a path from the root or a home directory: never joined to another path."""
    return ref.startswith(("/", "~")) or _URL.match(ref) is not None


def key_for(template_key: str, ref: str) -> str:
    """The key of *ref* written in the template whose own key is *template_key* ("": the top one)."""
    if is_absolute(ref):
        return ref
    if _URL.match(template_key):
        return urljoin(template_key, ref)
    return posixpath.normpath(posixpath.join(posixpath.dirname(template_key), ref))


def lookup(files: Mapping[str, Any], ref: str) -> str | None:
    """The key of *files* that *ref* names: as written, else normalised (``./a/../b.sh`` is ``b.sh``)."""
    if ref in files:
        return ref
    key = key_for("", ref)
    if key in files:
        return key
    # A key written unnormalised (``./x.sh``) by a client other than ours: scanned on a miss only.
    return next((k for k in files if not is_absolute(k) and key_for("", k) == key), None)


def is_template_ref(type_name: str, files: Mapping[str, Any] | None = None) -> bool:
    """True when a resource type names a template file rather than a type."""
    if type_name.lower().endswith(TEMPLATE_SUFFIXES):
        return True
    return files is not None and "::" not in type_name and lookup(files, type_name) is not None


def _typed(resources: Any) -> Iterator[tuple[Any, Mapping[str, Any]]]:
    """``(type, map holding it)`` for each resource of a template's ``resources`` section and each
    member definition inside one (a ResourceGroup's ``resource_def``, a scaling group's ``resource``)."""
    if not isinstance(resources, Mapping):
        return
    for body in resources.values():
        if not isinstance(body, Mapping):
            continue
        yield body.get("type"), body
        props = body.get("properties")
        if isinstance(props, Mapping):
            for key in ("resource_def", "resource"):
                member = props.get(key)
                if isinstance(member, Mapping):
                    yield member.get("type"), member


#: CloudFormation's nested stack: its template is the file its ``TemplateURL`` property names.
CFN_STACK = "AWS::CloudFormation::Stack"


def _cfn_stacks(source: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The properties map of each AWS::CloudFormation::Stack resource whose TemplateURL is a string
    (in a CFN-format template's ``Resources`` or a HOT one's ``resources``)."""
    for section, type_key, props_key in (
        ("Resources", "Type", "Properties"),
        ("resources", "type", "properties"),
    ):
        resources = source.get(section)
        for body in resources.values() if isinstance(resources, Mapping) else ():
            props = body.get(props_key) if isinstance(body, Mapping) else None
            url = props.get("TemplateURL") if isinstance(props, dict) else None
            if isinstance(url, str) and body.get(type_key) == CFN_STACK:
                yield props  # type: ignore[misc]


def canonical(source: Any, template_key: str) -> Any:
    """*source*, the template read from the file *template_key*, with the file names in it made keys.

    ``get_file`` arguments and template types (of resources, and of group members) are
    rewritten, as python-heatclient rewrites them to URLs.
    """
    out = _with_file_keys(source, template_key)
    if isinstance(out, dict):
        for type_name, holder in _typed(out.get("resources")):
            if isinstance(type_name, str) and is_template_ref(type_name):
                holder["type"] = key_for(template_key, type_name)  # type: ignore[index]
        for props in _cfn_stacks(out):
            props["TemplateURL"] = key_for(template_key, props["TemplateURL"])
    return out


def _with_file_keys(node: Any, template_key: str) -> Any:
    if isinstance(node, Mapping):
        if len(node) == 1 and isinstance(node.get("get_file"), str):
            return {"get_file": key_for(template_key, node["get_file"])}
        return {k: _with_file_keys(v, template_key) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_file_keys(v, template_key) for v in node]
    return node


def references(source: Any) -> Iterator[tuple[str, str]]:
    """``("file" | "template", name)`` for each ``get_file`` argument and template type of a template."""
    for node in _walk(source):
        if isinstance(node, Mapping) and len(node) == 1 and isinstance(node.get("get_file"), str):
            yield "file", node["get_file"]
    if isinstance(source, Mapping):
        for type_name, _ in _typed(source.get("resources")):
            if isinstance(type_name, str) and is_template_ref(type_name):
                yield "template", type_name
        for props in _cfn_stacks(source):
            yield "template", props["TemplateURL"]


def _walk(node: Any) -> Iterator[Any]:
    yield node
    children = node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else ()
    for child in children:
        yield from _walk(child)


def closure(
    files: Mapping[str, str], roots: Iterable[str], load: Callable[[str, str], Any]
) -> dict[str, str]:
    """The entries of *files* that the templates *roots* (keys or type names) need, transitively.

    *load* reads a template's text (``loader.load_yaml(text, what)``); a template that does
    not load raises there, as parsing it would.
    """
    out: dict[str, str] = {}
    todo = [("template", r) for r in roots]
    while todo:
        kind, ref = todo.pop()
        key = lookup(files, ref)
        if key is None or key in out:
            continue
        out[key] = files[key]
        if kind == "template":
            todo += list(references(canonical(load(files[key], key), key)))
    return out
