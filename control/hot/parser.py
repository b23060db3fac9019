"""Parsing a HOT template: each section read and checked into a Template.

``parse_template`` either returns a Template that the engine can build without meeting a
structural problem, or raises TemplateError naming the first problem's path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from control.hot import cfn, cfnformat, external
from control.hot.checker import Checker
from control.hot.environment import Environment, map_type
from control.hot.errors import TemplateError, at
from control.hot.files import CFN_STACK, is_template_ref
from control.hot.groups import MEMBER_PROPERTY, canary_terms, check_member
from control.hot.heatstack import HEAT_STACK, check_stack
from control.hot.loader import check_document, load_yaml
from control.hot.names import resource_name_problem
from control.hot.nesting import Nesting, parse_nested
from control.hot.nesting import check_properties as check_nested_properties
from control.hot.parameters import ParameterDef, parse_parameter_defs
from control.hot.schema import TypeSpec, check_keys, check_properties, describe
from control.hot.sharing import Shared
from control.hot.template import OutputDef, ResourceDef, Template
from control.hot.types import ALIASES, TYPES
from control.hot.versions import CFN_VERSIONS, canonical_version

SECTIONS = (
    "heat_template_version",
    "description",
    "parameter_groups",
    "parameters",
    "resources",
    "outputs",
    "conditions",
)
RESOURCE_KEYS = (
    "type",
    "properties",
    "metadata",
    "depends_on",
    "update_policy",
    "deletion_policy",
    "condition",
    "external_id",
)
DELETION_POLICIES = {"delete": "Delete", "retain": "Retain", "snapshot": "Snapshot"}
INFRASTRUCTURE = (
    "OS::Neutron::",
    "OS::Cinder::",
    "OS::Nova::",
    "OS::Glance::",
    "OS::Keystone::",
    "OS::Swift::",
    "OS::Octavia::",
    "OS::Designate::",
    "OS::Aodh::",  # alarms: no alarm service here; a scaling policy is signalled by its URL
    "AWS::",
)


def parse_template(
    source: str | Mapping[str, Any],
    *,
    files: Mapping[str, Any] | None = None,
    environment: Environment | None = None,
    types: Mapping[str, TypeSpec] = TYPES,
    nesting: Nesting | None = None,
) -> Template:
    """Parse and validate a HOT (or CFN-format) template and the templates it nests; raises
    TemplateError at the first problem.

    *nesting* says how deep the stack is and caps how deep its template resources may go.
    """
    data = _document(source)
    key = cfnformat.format_key(data)
    if key is None:
        return _parse(
            data, canonical_version(data.get("heat_template_version")), {}, files, environment, types, nesting
        )
    hot, version, mappings = cfnformat.to_hot(data, key)
    try:
        template = _parse(hot, version, mappings, files, environment, types, nesting)
    except TemplateError as e:
        raise TemplateError(cfnformat.cfn_path(e.path, data), e.reason) from None
    return dataclasses.replace(
        template, warnings=tuple(cfnformat.cfn_warning(w, data) for w in template.warnings)
    )


def _parse(
    data: Mapping[str, Any],
    version: str,
    mappings: Mapping[str, Any],
    files: Mapping[str, Any] | None,
    environment: Environment | None,
    types: Mapping[str, TypeSpec],
    nesting: Nesting | None,
) -> Template:
    files = dict(files or {})
    env = environment or Environment()
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise TemplateError("description", f"expected a string, got {describe(description)}")
    warnings: list[str] = []
    parameters = parse_parameter_defs(data.get("parameters"), warnings)
    _check_groups(data.get("parameter_groups"), parameters)
    scope = _Scope(files, env, types, nesting or Nesting(), warnings, version)
    data = _desugared(data, version, mappings)
    resources = {
        name: scope.resource(name, body)
        for name, body in _names_map(data.get("resources"), "resources").items()
    }
    template = Template(
        version=version,
        description=description,
        parameters=parameters,
        resources=resources,
        outputs=_outputs(data.get("outputs")),
        conditions=_names_map(data.get("conditions"), "conditions"),
        files=files,
        warnings=tuple(warnings),
    )
    Checker(template, types).run()
    return template


def _document(source: Any) -> Mapping[str, Any]:
    if isinstance(source, str):
        data = load_yaml(source, "template")
    elif isinstance(source, Mapping):
        check_document(source, "template")
        data = source
    else:
        raise TemplateError("template", f"expected YAML text or a map, got {describe(source)}")
    if not isinstance(data, Mapping):
        raise TemplateError("template", f"expected a map of sections, got {describe(data)}")
    if cfnformat.format_key(data) is not None:
        return data
    for key in data:
        if key not in SECTIONS:
            raise TemplateError(str(key), f"unknown section; allowed: {', '.join(SECTIONS)}")
    return data


def _desugared(data: Mapping[str, Any], version: str, mappings: Mapping[str, Any]) -> Mapping[str, Any]:
    """The resources, outputs and conditions with the CFN calls Heat's oldest HOT (or a CFN
    template) takes written as HOT's."""
    if version != cfn.OLDEST and version not in CFN_VERSIONS:
        return data
    params, resources = data.get("parameters"), data.get("resources")
    names = (
        set(params) if isinstance(params, Mapping) else set(),
        set(resources) if isinstance(resources, Mapping) else set(),
        mappings,
    )
    return {
        **data,
        **{
            key: cfn.desugar(data[key], version, names, key)
            for key in ("resources", "outputs", "conditions")
            if key in data
        },
    }


def _names_map(section: Any, path: str) -> dict[str, Any]:
    """A section that maps names to definitions, checked to be one."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise TemplateError(path, f"expected a map of name -> definition, got {describe(section)}")
    for name in section:
        if not isinstance(name, str) or not name:
            raise TemplateError(path, f"names must be non-empty strings, not {name!r}")
    return dict(section)


def _check_groups(groups: Any, parameters: Mapping[str, ParameterDef]) -> None:
    if groups is None:
        return
    if not isinstance(groups, list):
        raise TemplateError("parameter_groups", f"expected a list, got {describe(groups)}")
    seen: set[str] = set()
    for i, group in enumerate(groups):
        path = at("parameter_groups", i)
        if not isinstance(group, Mapping) or set(group) - {"label", "description", "parameters"}:
            raise TemplateError(path, "expected a map with label, description and parameters")
        names = group.get("parameters") or []
        if not isinstance(names, list):
            raise TemplateError(at(path, "parameters"), "expected a list of parameter names")
        for j, name in enumerate(names):
            if not isinstance(name, str) or name not in parameters:
                raise TemplateError(at(at(path, "parameters"), j), f"{name!r} is not a declared parameter")
            if name in seen:
                raise TemplateError(at(at(path, "parameters"), j), f"{name!r} is in more than one group")
            seen.add(name)


def _mapping(body: Mapping[str, Any], key: str, path: str, shared: Shared) -> dict[str, Any]:
    """The map *key* of a resource, rebuilt from the template's *shared* parts."""
    value = body.get(key)
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise TemplateError(at(path, key), f"expected a map, got {describe(value)}")
    return shared.tree(dict(value))  # type: ignore[no-any-return]


class _Scope:
    """What a template's resources are read against: its files, environment, types and depth."""

    def __init__(
        self,
        files: Mapping[str, str],
        env: Environment,
        types: Mapping[str, TypeSpec],
        nesting: Nesting,
        warnings: list[str],
        version: str,
    ) -> None:
        self.files, self.env, self.types, self.nesting, self.warnings = files, env, types, nesting, warnings
        self.version = version
        self.shared = Shared()  # equal parts of this template's resources, kept once

    def _parse(self, source: Any, files: Mapping[str, str], env: Environment, nesting: Nesting) -> Template:
        return parse_template(source, files=files, environment=env, types=self.types, nesting=nesting)

    def resource(self, name: str, body: Any) -> ResourceDef:
        path = f"resources.{name}"
        _check_keys(name, body, path)
        original = body.get("type")
        if not isinstance(original, str) or not original:
            raise TemplateError(at(path, "type"), "is required: the name of a resource type")
        rtype = map_type(self.env, original, name)
        rtype = self.shared.tree(ALIASES.get(rtype, rtype))
        properties = _mapping(body, "properties", path, self.shared)
        nested = outputs = None
        if rtype in self.types:
            check_properties(self.types[rtype], properties, at(path, "properties"), self.warnings)
            if rtype in MEMBER_PROPERTY:
                scope = (self.files, self.env, self.types, self.nesting, self.warnings)
                check_member(name, rtype, properties, at(path, "properties"), scope, self._parse)
            if rtype in (HEAT_STACK, CFN_STACK):
                where = at(path, "properties")
                outputs = check_stack(
                    name, properties, where, (self.files, self.env, self.nesting), self._parse
                )
        elif is_template_ref(rtype, self.files):
            rtype, nested = parse_nested(
                name, rtype, at(path, "type"), self.files, self.env, self.nesting, self._parse
            )
            check_nested_properties(nested, rtype, properties, at(path, "properties"), self.env)
        else:
            raise _unsupported_type(at(path, "type"), original, rtype, self.types)
        update_policy = _mapping(body, "update_policy", path, self.shared)
        spec = self.types.get(rtype)
        if spec is not None and spec.update_policy is not None:
            check_keys(spec.update_policy or {}, update_policy, at(path, "update_policy"))
            if isinstance(update_policy.get("canary"), Mapping):
                canary_terms(update_policy["canary"], at(at(path, "update_policy"), "canary"))
        return ResourceDef(
            name=name,
            type=rtype,
            original_type=self.shared.tree(original),
            properties=properties,
            depends_on=_depends_on(body.get("depends_on"), at(path, "depends_on")),
            metadata=_mapping(body, "metadata", path, self.shared),
            deletion_policy=_deletion_policy(body.get("deletion_policy"), at(path, "deletion_policy")),
            update_policy=update_policy,
            condition=body.get("condition"),
            nested=nested,
            stack_outputs=outputs,
            external_id=external.checked(body, rtype, path, self.version),
        )


def _check_keys(name: str, body: Any, path: str) -> None:
    problem = resource_name_problem(name)
    if problem is not None:  # the path holds the name only when it cannot forge a line
        raise TemplateError(path if name.isprintable() else "resources", problem)
    if not isinstance(body, Mapping):
        raise TemplateError(path, f"expected a map with at least 'type', got {describe(body)}")
    for key in body:
        if key not in RESOURCE_KEYS:
            raise TemplateError(at(path, key), f"unknown key; allowed: {', '.join(RESOURCE_KEYS)}")


def _unsupported_type(path: str, original: str, rtype: str, types: Mapping[str, TypeSpec]) -> TemplateError:
    mapped = f" (mapped from {original!r} by the environment)" if rtype != original else ""
    reason = f"type {rtype!r}{mapped} is not supported; supported types: {', '.join(sorted(types))}"
    if rtype.startswith(INFRASTRUCTURE):
        reason += (
            "; Anneal creates no infrastructure: to skip this resource, map its type in an "
            f'environment\'s resource_registry, e.g. resource_registry: {{"{rtype}": OS::Heat::None}}'
        )
    return TemplateError(path, reason)


def _depends_on(value: Any, path: str) -> tuple[str, ...]:
    names = [] if value is None else [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TemplateError(path, "expected a resource name or a list of resource names")
    return tuple(dict.fromkeys(names))


def _deletion_policy(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in DELETION_POLICIES:
        raise TemplateError(path, f"{value!r} is not one of Delete, Retain, Snapshot")
    return DELETION_POLICIES[value.lower()]


def _outputs(section: Any) -> dict[str, OutputDef]:
    outputs = {}
    for name, body in _names_map(section, "outputs").items():
        path = f"outputs.{name}"
        if not isinstance(body, Mapping) or "value" not in body:
            raise TemplateError(path, "expected a map with a value")
        for key in body:
            if key not in ("value", "description", "condition"):
                raise TemplateError(at(path, key), "unknown key; allowed: value, description, condition")
        description = body.get("description")
        if description is not None and not isinstance(description, str):
            raise TemplateError(at(path, "description"), f"expected a string, got {describe(description)}")
        outputs[name] = OutputDef(name, body["value"], description, body.get("condition"))
    return outputs
