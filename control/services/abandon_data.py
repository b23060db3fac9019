"""Heat's abandon data as Anneal writes and reads it: the stack tree, its secrets sealed.

A resource that made a nested stack (a template resource, a ResourceGroup or
AutoScalingGroup) carries, as in Heat's data, the nested stack's own abandon data in its
place (``name``, ``id``, ``template``, ``resources``...), plus its own ``type``,
``resource_id`` and ``resource_data.anneal``. What adopt re-creates of the nested stacks
(their rows as stored: definitions, facades, outputs, resources) is one sealed value,
``anneal_nested``. Every secret is sealed with the key given (the data key, or a hand-over's
transfer key: control/services/handover.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from control.errors import BadRequestError
from control.hot import taint
from control.services import handover
from control.store import crypt
from control.store.orm import ResourceRow, StackRow

#: Where Anneal keeps, in each resource's abandon data, what adopting it needs back.
KEPT = "anneal"
#: The sealed rows of the nested stacks and their resources.
NESTED = "anneal_nested"


@dataclass
class Tree:
    """A stack and every stack nested in it (parents first), with their current resources."""

    top: StackRow
    nested: list[StackRow] = field(default_factory=list)
    rows: list[ResourceRow] = field(default_factory=list)
    #: Servers a stack of the tree made: id -> that stack's id.
    owned: dict[str, str] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return [self.top.id, *(s.id for s in self.nested)]


def abandon_data(tree: Tree, key: bytes) -> dict[str, Any]:
    """Heat's abandon data of the tree, its secrets sealed with *key*."""
    data = _stack_data(tree, tree.top, key)
    if tree.nested:
        data[NESTED] = crypt.seal(
            key,
            {
                "stacks": [handover.record(s) for s in tree.nested],
                "resources": [handover.record(r, "id") for r in tree.rows if r.stack_id != tree.top.id],
            },
        )
    return data


def _stack_data(tree: Tree, stack: StackRow, key: bytes) -> dict[str, Any]:
    hidden = set(stack.hidden or [])
    environment = dict(stack.environment)
    for section in ("parameters", "parameter_defaults"):
        environment[section] = _sealed_parameters(dict(environment.get(section) or {}), hidden, key)
    children = {c.id: c for c in tree.nested if c.parent_id == stack.id}
    resources = {}
    for r in (r for r in tree.rows if r.stack_id == stack.id and r.current):
        own = {
            "name": r.name,
            "resource_id": r.physical_id,
            "type": r.type,
            "action": r.action,
            "status": r.status,
            "metadata": {},
            "resource_data": {
                KEPT: {
                    "properties": _sealed(r.properties, key),
                    "attributes": _sealed(dict(r.attributes), key),
                    "requires": list(r.requires),
                    "owned_server": tree.owned.get(r.physical_id or "") == stack.id,
                }
            },
        }
        child = children.get(r.physical_id or "")
        # As Heat nests it: the nested stack's data in the resource's place, our keys kept beside.
        resources[r.name] = {**_stack_data(tree, child, key), **own} if child is not None else own
    return {
        "name": stack.name,
        "id": stack.id,
        "action": stack.action,
        "status": stack.status,
        "template": stack.template,
        "files": dict(stack.files),
        "environment": environment,
        "parameters": _sealed_parameters(dict(stack.params_given), hidden, key),
        "tags": list(stack.tags or []),
        "timeout_mins": stack.timeout_mins,
        "disable_rollback": not stack.rollback,
        "resources": resources,
    }


def nested_rows(data: Mapping[str, Any], key: bytes) -> dict[str, list[dict[str, Any]]]:
    """The nested stacks' and their resources' rows the data carries (none for a stack without)."""
    sealed = data.get(NESTED)
    if sealed is None:
        return {"stacks": [], "resources": []}
    try:
        rows = crypt.unseal(key, sealed)
    except (crypt.DataKeyError, AttributeError, KeyError) as e:
        raise BadRequestError(
            f"adopt_stack_data.{NESTED}: does not open ({e})", where=f"adopt_stack_data.{NESTED}"
        ) from None
    return {"stacks": list(rows.get("stacks") or []), "resources": list(rows.get("resources") or [])}


def _sealed(value: Any, key: bytes) -> Any:
    """*value* with each Secret in it sealed."""
    if isinstance(value, taint.Secret):
        return crypt.seal(key, value)
    if isinstance(value, Mapping):
        return {k: _sealed(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_sealed(v, key) for v in value]
    return value


def _sealed_parameters(values: dict[str, Any], hidden: set[str], key: bytes) -> dict[str, Any]:
    """Parameter values, the hidden ones sealed whole (as given: adopt gives them back as given)."""
    return {
        k: crypt.seal(key, taint.reveal(v)) if k in hidden else _sealed(v, key) for k, v in values.items()
    }


def _opened(value: Any, key: bytes, where: str) -> Any:
    """*value* with each sealed value in it opened; another control plane's is refused, naming *where*."""
    if crypt.is_sealed(value):
        try:
            return crypt.unseal(key, value)
        except crypt.DataKeyError as e:
            raise BadRequestError(
                f"{where}: a sealed secret this control plane cannot open ({e}): abandon data is adopted "
                "where it was abandoned; a hidden parameter's value can be given again in parameters",
                where=where,
            ) from None
    if isinstance(value, Mapping):
        return {k: _opened(v, key, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_opened(v, key, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def opened_data(data: dict[str, Any], given: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The abandon data with its secrets opened; a parameter the request gives again stays shut."""
    where = "adopt_stack_data"
    params = data.get("parameters")
    if isinstance(params, Mapping):
        data["parameters"] = {
            k: v if k in given else _opened(v, key, f"{where}.parameters.{k}") for k, v in params.items()
        }
    for section in ("environment", "resources"):
        data[section] = _opened(data.get(section), key, f"{where}.{section}")
    return data
