"""Checks that need to know what resource types do (the parser checks the rest)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from control import hot
from control.resources.deploy import SUPPORTED_SIGNAL_TRANSPORTS

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
