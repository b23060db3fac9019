"""HOT templates and environments: parse, validate, resolve parameters, evaluate functions.

Pure Python: no I/O beyond parsing the YAML text it is given. Every problem is a
TemplateError whose ``path`` says where (``resources.web.properties.config``).
"""

from control.hot.binding import condition_values, resolve_parameters
from control.hot.environment import Environment, map_type, merge_environments, parse_environment
from control.hot.errors import TemplateError
from control.hot.evaluation import Context, evaluate_condition, resolve
from control.hot.functions import CONDITION_FUNCTIONS, FUNCTIONS, call_of, calls, references
from control.hot.loader import MAX_TEMPLATE_BYTES, load_yaml
from control.hot.parameters import PSEUDO_PARAMETERS, ParameterDef, Parameters
from control.hot.parser import parse_template
from control.hot.schema import PropSpec, TypeSpec, apply_defaults
from control.hot.taint import Secret
from control.hot.template import OutputDef, ResourceDef, Template
from control.hot.types import TYPES, component_action_clash, random_minimum

__all__ = [
    "CONDITION_FUNCTIONS",
    "FUNCTIONS",
    "MAX_TEMPLATE_BYTES",
    "PSEUDO_PARAMETERS",
    "TYPES",
    "Context",
    "Environment",
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
    "call_of",
    "calls",
    "component_action_clash",
    "condition_values",
    "evaluate_condition",
    "load_yaml",
    "map_type",
    "merge_environments",
    "parse_environment",
    "parse_template",
    "random_minimum",
    "references",
    "resolve",
    "resolve_parameters",
]
