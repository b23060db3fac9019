"""A stack's parsed definition: template, environment and parameters, from its row."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from sqlalchemy.orm import defer

from agent import wire_files
from control import hot
from control.hot import taint
from control.hot.definition import Definition, build, plain
from control.resources import nested, read_attribute
from control.store.orm import StackRow
from control.txn import Txn

__all__ = ["Definition", "Definitions", "StackContext", "build", "plain", "resolve", "without"]

log = logging.getLogger(__name__)

#: The stack row's big columns a Definition is parsed from (plus the one a rollback returns
#: to); ``files`` is not among them: expressions read it while resources act (``get_file``).
DEFINITION_COLUMNS = ("template", "environment", "params_given", "previous")
#: An attribute that stands for the resource in get_resource (an AWS wait handle's signed URL).
REFERENCE = "anneal:ref"


def without(*columns: str) -> list[Any]:
    """Loader options: the stack row without *columns* (decrypted and decoded only when read;
    reading one raises, it does not query). At 50,000 deployments the template alone decodes
    to 150 MB of Python objects."""
    return [defer(getattr(StackRow, name), raiseload=True) for name in columns]


class ResourceView(Protocol):
    """What expressions read of another resource: a full row, or the engine's light record of one."""

    @property
    def type(self) -> str: ...

    @property
    def physical_id(self) -> str | None: ...

    @property
    def attributes(self) -> Mapping[str, Any]: ...


class StackContext:
    """What intrinsic functions see in a stack: its parameters, resources and files."""

    def __init__(self, stack: StackRow, defn: Definition, rows: Mapping[str, ResourceView]) -> None:
        self._stack, self._defn, self._rows = stack, defn, rows

    def param(self, name: str) -> Any:
        stack = self._stack  # OS::project_id: the stack's project (Heat's: its Keystone project's id)
        pseudo = {"OS::stack_name": stack.name, "OS::stack_id": stack.id, "OS::project_id": stack.project}
        if name in pseudo:
            return pseudo[name]
        value = self._defn.params.values[name]
        return taint.Secret(value) if name in self._defn.params.hidden else value

    def resource_id(self, name: str) -> Any:
        """What get_resource gives: the physical id, or the reference a handler set (a URL)."""
        row = self._rows.get(name)
        return (row.attributes.get(REFERENCE) or row.physical_id) if row is not None else None

    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        row = self._rows.get(name)
        return read_attribute(row.type, row.attributes, attribute, path) if row is not None else None

    def file(self, path: str) -> Any:
        """A get_file: the file's text, its binary envelope, or a directory's map of those."""
        key = hot.lookup_file(self._stack.files, path)
        if key is None:  # the parser checked every name: a stack stored before that check
            raise hot.TemplateError(path, "get_file: file was not provided")
        value = self._stack.files[key]
        if isinstance(value, Mapping) and list(value) == [wire_files.DIRECTORY_KEY]:
            return dict(value[wire_files.DIRECTORY_KEY])
        return value

    def condition(self, name: str) -> bool:
        return self._defn.conditions.get(name, False)

    def facade(self, key: str) -> Any:
        if self._stack.parent_id is None:
            raise hot.TemplateError(key, "resource_facade: this stack is not nested in another")
        return (self._stack.facade or {}).get(key)


async def resolve(node: Any, ctx: hot.Context, path: str, budget: hot.Budget | None = None) -> Any:
    """*node* evaluated in *ctx* (under *budget*, else each call's own); in a worker thread when it
    calls ``yaql``.

    A yaql expression may run for yaqlfn.TIME_LIMIT seconds, an evaluation's expressions for
    budget.YAQL_SECONDS: on the event loop every other request of the process would wait that
    long. The thread runs in a copy of this task's context under the same budget, and reads only
    what *ctx* holds (this step's rows, which nothing else touches while the step waits for it).
    Other nodes stay on the loop: a thread per resource would slow a stack of 50,000 down.
    """
    if not hot.mentions(node, "yaql"):
        return _resolved(node, ctx, path, budget)
    return await asyncio.to_thread(_resolved_apart, node, ctx, path, budget)


def _resolved(node: Any, ctx: hot.Context, path: str, budget: hot.Budget | None) -> Any:
    if budget is None:
        return hot.resolve(node, ctx, path)
    with hot.evaluating(budget):
        return hot.resolve(node, ctx, path)


def _resolved_apart(node: Any, ctx: hot.Context, path: str, budget: hot.Budget | None) -> Any:
    log.debug("%s: evaluating yaql off the event loop", path)
    try:
        return _resolved(node, ctx, path, budget)
    finally:
        log.debug("%s: yaql evaluated", path)


def environment_to_json(env: hot.Environment) -> dict[str, Any]:
    return hot.environment_to_json(env)


def environment_from_json(obj: Mapping[str, Any]) -> hot.Environment:
    return hot.environment_from_json(obj)


class Definitions:
    """Parsed definitions cached per stack version: the newest seen of each stack and the one before.

    The one before stays while a step of it may still run here (an update's request keeps the new
    version's as soon as it commits; a read may parse it): a step finds its own version cached
    from its start to its end, and drops the older ones when it starts (``release_older``).
    """

    def __init__(self, max_depth: int = hot.MAX_NESTED_DEPTH) -> None:
        # By stack id, not (id, version): replacing a stack's older version is O(1), where
        # rebuilding the whole cache made 10,000 nested stacks' first steps quadratic.
        self._cache: dict[str, dict[int, Definition]] = {}
        self.max_depth = max_depth

    def get(self, stack: StackRow) -> Definition:
        found = self.cached(stack.id, stack.version)
        if found is None:
            # Its parameter values were checked when given: allowed_pattern is not matched again.
            with hot.evaluating(hot.Budget(None, patterns=False)):
                found = build(
                    stack.template,
                    stack.files,
                    environment_from_json(stack.environment),
                    stack.params_given,
                    stack_name=stack.name,
                    stack_id=stack.id,
                    nesting=hot.Nesting(stack.nested_depth, self.max_depth),
                )
            self.keep(stack.id, stack.version, found)
        return found

    def cached(self, stack_id: str, version: int) -> Definition | None:
        """The definition of that stack version if this process has parsed it already."""
        return self._cache.get(stack_id, {}).get(version)

    def adopt(self, txn: Txn) -> None:
        """After each commit of *txn* (a ``Txn.committed`` hook): keep the definitions its handlers built
        for the nested stacks they wrote (``nested.built``), so a nested stack's first step does not
        parse its template again."""
        for stack_id, (version, defn) in nested.built(txn).items():
            self.keep(stack_id, version, defn)

    def forget(self, stack_id: str) -> None:
        self._cache.pop(stack_id, None)

    def keep(self, stack_id: str, version: int, defn: Definition) -> None:
        """Cache *defn* as that version's; versions older than the one before it go. A create's or
        update's request keeps the one it validated once committed (services/stacks.py), so this
        process's steps neither decode its template nor parse it again."""
        versions = self._cache.setdefault(stack_id, {})
        versions[version] = defn
        for old in [v for v in versions if v < max(versions) - 1]:
            del versions[old]

    def release_older(self, stack_id: str, version: int) -> None:
        """A step of *version* starts: no step of an older one runs here any more (one lease per
        stack), so their definitions go: a big stack's update holds one definition in its steps."""
        versions = self._cache.get(stack_id, {})
        for old in [v for v in versions if v < version]:
            del versions[old]
