"""HOT templates and environments: parse, validate, resolve parameters, evaluate functions.

Pure Python: no I/O beyond parsing the YAML text it is given. Every problem is a
TemplateError whose ``path`` says where (``resources.web.properties.config``).
"""

from control.hot.binding import condition_values, reads_parameters, resolve_parameters
from control.hot.budget import DEFAULT_TOTAL_BYTES, Budget, BudgetError, evaluating
from control.hot.cfnformat import resource_body
from control.hot.definition import Definition, bind, build, plain
from control.hot.environment import (
    HOOKS,
    Environment,
    child_environment,
    hooks_for,
    map_type,
    merge_environments,
    parse_environment,
)
from control.hot.environment import from_json as environment_from_json
from control.hot.environment import to_json as environment_to_json
from control.hot.errors import TemplateError
from control.hot.evaluation import Context, evaluate_condition, resolve, select
from control.hot.files import closure as file_closure
from control.hot.files import is_template_ref
from control.hot.files import lookup as lookup_file
from control.hot.functions import CONDITION_FUNCTIONS, FUNCTIONS, call_of, calls, mentions, references
from control.hot.groups import canary_terms
from control.hot.loader import MAX_TEMPLATE_BYTES, load_yaml
from control.hot.nesting import MAX_NESTED_DEPTH, STACK_ID, Nesting, child_files, load_nested
from control.hot.outline import outline, resources_named
from control.hot.parameters import PSEUDO_PARAMETERS, ParameterDef, Parameters
from control.hot.parser import parse_template
from control.hot.retry import policy as retry_policy
from control.hot.schema import PropSpec, TypeSpec, apply_defaults
from control.hot.stackcheck import (
    SUPPORTED_SIGNAL_TRANSPORTS,
    Checked,
    check_types,
    load_sources,
    validate,
)
from control.hot.taint import Secret
from control.hot.template import OutputDef, ResourceDef, Template
from control.hot.types import SERVER_TYPES, TYPES, component_action_clash, random_minimum

__all__ = [
    "CONDITION_FUNCTIONS",
    "DEFAULT_TOTAL_BYTES",
    "FUNCTIONS",
    "HOOKS",
    "MAX_NESTED_DEPTH",
    "MAX_TEMPLATE_BYTES",
    "PSEUDO_PARAMETERS",
    "SERVER_TYPES",
    "STACK_ID",
    "SUPPORTED_SIGNAL_TRANSPORTS",
    "TYPES",
    "Budget",
    "BudgetError",
    "Checked",
    "Context",
    "Definition",
    "Environment",
    "Nesting",
    "OutputDef",
    "ParameterDef",
    "Parameters",
    "PropSpec",
    "ResourceDef",
    "Secret",
    "Template",
    "TemplateError",
    "TypeSpec",
    "apply_defaults",
    "bind",
    "build",
    "call_of",
    "calls",
    "canary_terms",
    "check_types",
    "child_environment",
    "child_files",
    "component_action_clash",
    "condition_values",
    "environment_from_json",
    "environment_to_json",
    "evaluate_condition",
    "evaluating",
    "file_closure",
    "hooks_for",
    "is_template_ref",
    "load_nested",
    "load_sources",
    "load_yaml",
    "lookup_file",
    "map_type",
    "mentions",
    "merge_environments",
    "outline",
    "parse_environment",
    "parse_template",
    "plain",
    "random_minimum",
    "reads_parameters",
    "references",
    "resolve",
    "resolve_parameters",
    "resource_body",
    "resources_named",
    "retry_policy",
    "select",
    "validate",
]
