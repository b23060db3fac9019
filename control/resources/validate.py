"""Checks that need to know what resource types do (the parser checks the rest)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from agent import wire_files
from control import hot
from control.hot.budget import current
from control.resources.deploy import SUPPORTED_SIGNAL_TRANSPORTS
from control.resources.servers import server_name

DEPLOYMENT = "OS::Heat::SoftwareDeployment"
SIGNALLING = frozenset(
    {
        DEPLOYMENT,
        "OS::Heat::StructuredDeployment",
        "OS::Heat::SoftwareDeploymentGroup",
        "OS::Heat::StructuredDeploymentGroup",
    }
)
CONFIGS = frozenset({"OS::Heat::SoftwareConfig", "OS::Heat::StructuredConfig", "OS::Heat::SoftwareComponent"})
ALWAYS = frozenset({"deploy_stdout", "deploy_stderr", "deploy_status_code"})
GROUPS = frozenset({"OS::Heat::SoftwareDeploymentGroup", "OS::Heat::StructuredDeploymentGroup"})
SERVERS = frozenset({"OS::Heat::DeployedServer", "OS::Nova::Server"})
#: What get_resource gives in a dry run: as long as the id it stands for.
PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000"


def check_definition(template: hot.Template) -> list[str]:
    """Raise hot.TemplateError for what would fail later (an unsupported transport); warn of the rest.

    A ``get_attr`` of an output a deployment's config does not declare is accepted, as Heat
    accepts it at create; it resolves to null. The warning names it.
    """
    resources = template.resources
    for name, rdef in resources.items():
        if rdef.type not in SIGNALLING:
            continue
        transport = rdef.properties.get("signal_transport")
        if isinstance(transport, str) and transport not in SUPPORTED_SIGNAL_TRANSPORTS:
            raise hot.TemplateError(
                f"resources.{name}.properties.signal_transport",
                f"{transport} is not supported; use one of {', '.join(SUPPORTED_SIGNAL_TRANSPORTS)}",
            )
    warnings = []
    for path, args in _get_attrs(template):
        if not isinstance(args, list) or len(args) < 2 or not isinstance(args[0], str):
            continue
        target, attribute = args[0], args[1]
        declared = _declared_outputs(resources, target)
        if declared is not None and isinstance(attribute, str) and attribute not in declared | ALWAYS:
            warnings.append(
                f"{path}: resource {target!r} has no attribute {attribute!r}, it resolves to null; its "
                f"config declares outputs {sorted(declared)} (and deploy_stdout, deploy_stderr, "
                "deploy_status_code)"
            )
    return warnings


def _get_attrs(template: hot.Template) -> Iterator[tuple[str, Any]]:
    for name, rdef in template.resources.items():
        for path, fn, args in hot.calls(rdef.properties, f"resources.{name}.properties"):
            if fn == "get_attr":
                yield path, args
    for name, out in template.outputs.items():
        for path, fn, args in hot.calls(out.value, f"outputs.{name}.value"):
            if fn == "get_attr":
                yield path, args


def _declared_outputs(resources: Mapping[str, hot.ResourceDef], target: str) -> frozenset[str] | None:
    """Names a deployment's config declares, when the template says them literally."""
    rdef = resources.get(target)
    if rdef is None or rdef.type not in (DEPLOYMENT, "OS::Heat::StructuredDeployment"):
        return None
    config = rdef.properties.get("config")
    if not (isinstance(config, Mapping) and list(config) == ["get_resource"]):
        return None
    cfg = resources.get(str(config["get_resource"]))
    if cfg is None or cfg.type not in CONFIGS:
        return None
    outputs = cfg.properties.get("outputs", [])
    if not isinstance(outputs, list):
        return None
    names = [o.get("name") for o in outputs if isinstance(o, Mapping)]
    if not all(isinstance(n, str) for n in names):
        return None
    return frozenset(str(n) for n in names)


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
            if rdef.type in SERVERS:
                server_name(stack, name, props if isinstance(props, Mapping) else {})
            servers = props.get("servers") if rdef.type in GROUPS else None
            if isinstance(servers, Mapping) and len(servers) > 1:  # each member stores the properties
                shared = budget.size({k: v for k, v in props.items() if k != "servers"})
                budget.spend((len(servers) - 1) * shared, f"{path}.servers", "the group's members")
        for name in outputs:
            hot.resolve(template.outputs[name].value, ctx, f"outputs.{name}.value")
