"""The parsed template: resource and output definitions, and the resource dependency graph.

``parser.parse_template`` builds one; it is immutable and valid, so the engine can build it
without meeting a structural problem.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from control.hot.functions import call_of, calls, references
from control.hot.parameters import ParameterDef


@dataclass(frozen=True, slots=True)
class ResourceDef:
    name: str
    type: str  # after the environment's resource_registry
    original_type: str  # as written in the template
    properties: Mapping[str, Any]
    depends_on: tuple[str, ...]
    metadata: Mapping[str, Any]
    deletion_policy: str | None  # 'Delete' | 'Retain' | 'Snapshot'
    update_policy: Mapping[str, Any]
    condition: Any  # None, a boolean, a condition name or an inline condition
    #: A template resource's parsed template (``type`` is then its key in the files).
    nested: Template | None = None
    #: An OS::Heat::Stack's or AWS::CloudFormation::Stack's literal template: (its label, its
    #: output names), so ``Outputs.NAME`` is checked at parse; None when computed or another type.
    stack_outputs: tuple[str, frozenset[str]] | None = None
    #: ``external_id``: the existing thing the resource adopts instead of creating (as written).
    external_id: Any = None


@dataclass(frozen=True)
class OutputDef:
    name: str
    value: Any
    description: str | None
    condition: Any


@dataclass(frozen=True)
class Template:
    version: str  # canonical date, e.g. '2018-08-31'
    description: str
    parameters: Mapping[str, ParameterDef]
    resources: Mapping[str, ResourceDef]
    outputs: Mapping[str, OutputDef]
    conditions: Mapping[str, Any]
    files: Mapping[str, Any]  # text, or a binary or directory envelope (agent/wire_files.py)
    warnings: tuple[str, ...]

    def dependencies(self, name: str) -> frozenset[str]:
        """Resources ``name`` needs first: depends_on plus get_resource/get_attr targets."""
        return self._graph[name]

    def order(self) -> list[str]:
        """A topological order of the resources; ties keep template order (parsing refused cycles)."""
        return list(self._order)

    @cached_property
    def _order(self) -> tuple[str, ...]:
        # Once per template: every engine step and every `stack show --progress` of the CLI's
        # --wait asked for it, 0.1-0.2 s of sorting each at 60,000 resources.
        position = {name: i for i, name in enumerate(self.resources)}
        waiting = {name: 0 for name in self.resources}
        users: dict[str, list[str]] = {name: [] for name in self.resources}
        for name, deps in self._graph.items():
            for dep in deps & users.keys():
                users[dep].append(name)
                waiting[name] += 1
        ready = [position[name] for name, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        names, out = list(self.resources), []
        while ready:
            name = names[heapq.heappop(ready)]
            out.append(name)
            for user in users[name]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    heapq.heappush(ready, position[user])
        return tuple(out)

    def attribute_paths(self, name: str) -> frozenset[tuple[Any, ...]] | None:
        """The ``[attribute, key, ...]`` paths the template reads of resource *name* with get_attr.

        None when one of them is computed (a function call), so any attribute may be read.
        """
        return self._attribute_paths.get(name, frozenset())

    @cached_property
    def _attribute_paths(self) -> dict[str, frozenset[tuple[Any, ...]] | None]:
        found: dict[str, set[tuple[Any, ...]] | None] = {}
        nodes = [r.properties for r in self.resources.values()] + [
            r.metadata for r in self.resources.values()
        ]
        nodes += [o.value for o in self.outputs.values()]
        for node in nodes:
            for _, fn, args in calls(node):
                if fn != "get_attr" or not isinstance(args, list) or not isinstance(args[0], str):
                    continue
                paths = found.setdefault(args[0], set())
                if paths is None:
                    continue
                if any(call_of(a) is not None or not isinstance(a, str | int) for a in args[1:]):
                    found[args[0]] = None
                else:
                    paths.add(tuple(args[1:]))
        return {k: None if v is None else frozenset(v) for k, v in found.items()}

    def reads(self, name: str) -> frozenset[str]:
        """The attributes of resource *name* that get_attr reads anywhere in the template."""
        return self._reads.get(name, frozenset())

    @cached_property
    def _reads(self) -> dict[str, frozenset[str]]:
        found: dict[str, set[str]] = {}
        nodes = [r.properties for r in self.resources.values()] + [
            r.metadata for r in self.resources.values()
        ]
        for node in [*nodes, *(o.value for o in self.outputs.values())]:
            for _, fn, args in calls(node):
                if fn == "get_attr" and isinstance(args, list) and len(args) > 1 and isinstance(args[1], str):
                    found.setdefault(str(args[0]), set()).add(args[1])
        return {k: frozenset(v) for k, v in found.items()}

    @cached_property
    def _graph(self) -> dict[str, frozenset[str]]:
        # Equal sets are one (a server's deployments all need the same two resources): 0.26 KB a
        # deployment of a million otherwise.
        same: dict[frozenset[str], frozenset[str]] = {}
        return {
            name: same.setdefault(deps, deps)
            for name, r in self.resources.items()
            for deps in (frozenset(r.depends_on) | references(r.properties) | references(r.metadata),)
        }
