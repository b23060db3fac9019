"""A whole stack request checked: template and environment texts, parameters, type-aware checks.

The control plane's create and update run these (``load_sources``, then ``build`` and
``check_types``), under the evaluation budget, then dry-run every resource
(control/resources/validate.py), and so does `anneal template validate` offline: the same
error, with the same path, either way. ``validate`` is the library entry point
(``from control.hot import validate``): the same checks under the same budget and pattern
time, without the dry run (which needs to know what resource types do).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from control.hot.budget import DEFAULT_TOTAL_BYTES, Budget, evaluating
from control.hot.definition import build, plain
from control.hot.environment import Environment, merge_environments, parse_environment
from control.hot.errors import TemplateError
from control.hot.functions import calls
from control.hot.loader import MAX_TEMPLATE_BYTES, load_yaml
from control.hot.nesting import MAX_NESTED_DEPTH, Nesting
from control.hot.parameters import Parameters
from control.hot.template import ResourceDef, Template

SUPPORTED_SIGNAL_TRANSPORTS = (
    "CFN_SIGNAL",
    "HTTP",
    "NO_SIGNAL",
    "TEMP_URL_SIGNAL",
    "HEAT_SIGNAL",
    "ZAQAR_SIGNAL",
)
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


@dataclass(frozen=True)
class Checked:
    """A stack's definition that passed every check, and what it was warned of."""

    template: Template
    environment: Environment
    params: Parameters
    conditions: Mapping[str, bool]
    #: The template's, the parameters' and the type-aware checks' warnings (each "path: why").
    warnings: tuple[str, ...] = ()


def load_sources(
    template: Any, environments: Sequence[str], max_bytes: int = MAX_TEMPLATE_BYTES
) -> tuple[Any, Environment]:
    """The template (text or object) and the merged environments, each text capped at *max_bytes*."""
    if isinstance(template, str):
        template = load_yaml(template, "template", max_bytes)
    if not isinstance(template, Mapping):
        raise TemplateError("template", "expected a HOT template (text or object)")
    merged = merge_environments(
        [parse_environment(text, f"environments[{i}]", max_bytes) for i, text in enumerate(environments)]
    )
    return plain(template), merged


def validate(
    template: Any,
    *,
    files: Mapping[str, str] | None = None,
    environments: Sequence[str] = (),
    parameters: Mapping[str, Any] | None = None,
    max_bytes: int = MAX_TEMPLATE_BYTES,
    max_nested_depth: int = MAX_NESTED_DEPTH,
    stack_name: str = "validate",
    max_evaluation_bytes: int = DEFAULT_TOTAL_BYTES,
) -> Checked:
    """Everything a stack create checks (services/stacks.py runs the same calls), without a
    control plane; raises TemplateError."""
    source, env = load_sources(template, environments, max_bytes)
    with evaluating(Budget(max_evaluation_bytes)):
        defn = build(
            source,
            files or {},
            env,
            parameters or {},
            stack_name=stack_name,
            stack_id="",
            nesting=Nesting(0, max_nested_depth),
        )
    warnings = (*defn.template.warnings, *defn.params.warnings, *check_types(defn.template))
    return Checked(defn.template, env, defn.params, defn.conditions, warnings)


def check_types(template: Template) -> list[str]:
    """Raise TemplateError for what would fail later (an unsupported transport); warn of the rest.

    A ``get_attr`` of an output a deployment's config does not declare is accepted, as Heat
    accepts it at create; it resolves to null. The warning names it.
    """
    resources = template.resources
    for name, rdef in resources.items():
        if rdef.type not in SIGNALLING:
            continue
        transport = rdef.properties.get("signal_transport")
        if isinstance(transport, str) and transport not in SUPPORTED_SIGNAL_TRANSPORTS:
            raise TemplateError(
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


def _get_attrs(template: Template) -> Iterator[tuple[str, Any]]:
    for name, rdef in template.resources.items():
        for path, fn, args in calls(rdef.properties, f"resources.{name}.properties"):
            if fn == "get_attr":
                yield path, args
    for name, out in template.outputs.items():
        for path, fn, args in calls(out.value, f"outputs.{name}.value"):
            if fn == "get_attr":
                yield path, args


def _declared_outputs(resources: Mapping[str, ResourceDef], target: str) -> frozenset[str] | None:
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
