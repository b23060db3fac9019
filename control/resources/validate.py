"""Checks that need to know what resource types do: they live in control/hot/stackcheck.py.

There, `anneal template validate` runs them offline through the same function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent import wire_files
from control import hot
from control.hot.budget import current
from control.resources import secrecy
from control.resources.servers import server_name

GROUPS = frozenset({"OS::Heat::SoftwareDeploymentGroup", "OS::Heat::StructuredDeploymentGroup"})
SERVERS = frozenset({"OS::Heat::DeployedServer", "OS::Nova::Server"})
#: What get_resource gives in a dry run: as long as the id it stands for.
PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000"


def check_definition(template: hot.Template) -> list[str]:
    """Raise hot.TemplateError for what would fail later (an unsupported transport); the warnings."""
    return hot.check_types(template)


class DryContext:
    """What functions see in a dry run: parameters, files and conditions; resources are not made yet."""

    def __init__(
        self, values: Mapping[str, Any], conditions: Mapping[str, bool], files: Mapping[str, Any]
    ) -> None:
        self._values, self._conditions, self._files = values, conditions, files

    def param(self, name: str) -> Any:
        return self._values[name]

    def resource_id(self, name: str) -> Any:
        return PLACEHOLDER_ID

    def attribute(self, name: str, attribute: str, path: list[Any]) -> Any:
        return None

    def file(self, path: str) -> Any:
        key = hot.lookup_file(self._files, path)
        value = self._files.get(key, "") if key is not None else ""
        if isinstance(value, Mapping) and list(value) == [wire_files.DIRECTORY_KEY]:
            return dict(value[wire_files.DIRECTORY_KEY])
        return value

    def facade(self, key: str) -> Any:
        return None  # a placeholder, as for attributes: the engine reads the parent's facade

    def condition(self, name: str) -> bool:
        return self._conditions.get(name, False)


def dry_run(
    template: hot.Template, ctx: DryContext, resources: Iterable[str], outputs: Iterable[str], stack: str
) -> None:
    """Evaluate each resource's properties and each output once, as the engine will, and check
    server names. What resources give is a placeholder, so a call's other errors are left to the
    engine; what the calls build is charged to the current budget (BudgetError names the call)."""
    budget = current()
    with budget.leniently():
        for name in resources:
            rdef, path = template.resources[name], f"resources.{name}.properties"
            props = hot.resolve(rdef.properties, ctx, path)
            if rdef.type in SERVERS:  # a hidden value is refused as a name, as the engine refuses it
                secrecy.check_carriers(rdef.type, props, path)
                server_name(stack, name, props if isinstance(props, Mapping) else {})
            servers = props.get("servers") if rdef.type in GROUPS else None
            if isinstance(servers, Mapping) and len(servers) > 1:  # each member stores the properties
                shared = budget.size({k: v for k, v in props.items() if k != "servers"})
                budget.spend((len(servers) - 1) * shared, f"{path}.servers", "the group's members")
        for name in outputs:
            hot.resolve(template.outputs[name].value, ctx, f"outputs.{name}.value")
