"""OS::Heat::Stack: a nested stack whose template is the ``template`` property's text; and
AWS::CloudFormation::Stack, whose template is the file its ``TemplateURL`` names.

Heat's type can make the stack in another region (``context: {region_name}``); this control
plane has no regions, so a region is refused, naming it. The template (inline text, or
``get_file``) is parsed and checked at create as a template resource's is, one level deeper,
and ``parameters`` against its parameters. Attributes: ``outputs`` (a map of the nested
stack's outputs, so ``get_attr: [res, outputs, NAME]`` is one) and ``stack_name``.

AWS::CloudFormation::Stack takes ``TemplateURL``, ``Parameters`` and ``TimeoutInMinutes``; its
attributes are ``Outputs.NAME`` (``Fn::GetAtt: [res, Outputs.NAME]``), as in Heat. This control
plane fetches no URL: TemplateURL must name a file given in the request's ``files`` (the CLI
sends a local path's file, as it does for a template resource's type).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.hot.environment import Environment, child_environment
from control.hot.errors import TemplateError, at
from control.hot.files import CFN_STACK, canonical, lookup
from control.hot.functions import call_of
from control.hot.loader import load_yaml
from control.hot.nesting import Nesting, Parse, check_properties
from control.hot.schema import PropSpec, TypeSpec, is_integer

HEAT_STACK = "OS::Heat::Stack"
REMOTE = (
    "a stack in another region is not supported: this control plane has no regions "
    "(leave context.region_name out to nest the stack here)"
)


def _check(props: Mapping[Any, Any], path: str) -> None:
    context = props.get("context")
    region = context.get("region_name") if isinstance(context, Mapping) else None
    if region is not None:
        raise TemplateError(at(at(path, "context"), "region_name"), f"{region!r}: {REMOTE}")
    _positive_minutes(props, "timeout", path)


def _positive_minutes(props: Mapping[Any, Any], key: str, path: str) -> None:
    """A stack's timeout property, when given as a number, is at least one minute."""
    timeout = props.get(key)
    if timeout is not None and is_integer(timeout) and int(timeout) < 1:
        raise TemplateError(at(path, key), f"{timeout} is not a positive number of minutes")


SPEC = TypeSpec(
    HEAT_STACK,
    {
        "template": PropSpec("string", required=True),
        "parameters": PropSpec("map", default={}),
        "timeout": PropSpec("integer"),
        "context": PropSpec(
            "map",
            schema={
                "region_name": PropSpec("string"),
                "ca_cert": PropSpec("string", ignored=True),
                "insecure": PropSpec("boolean", ignored=True),
            },
        ),
    },
    frozenset({"outputs", "stack_name"}),
    check=_check,
)


def _cfn_check(props: Mapping[Any, Any], path: str) -> None:
    _positive_minutes(props, "TimeoutInMinutes", path)


CFN_SPEC = TypeSpec(
    CFN_STACK,
    {
        "TemplateURL": PropSpec("string", required=True),
        "Parameters": PropSpec("map", default={}),
        "TimeoutInMinutes": PropSpec("integer"),
    },
    frozenset(),
    check=_cfn_check,
    attribute_prefixes=("Outputs.",),
)


def cfn_template(url: Any, files: Mapping[str, str], path: str) -> Any:
    """What AWS::CloudFormation::Stack's TemplateURL stands for here: a ``get_file`` of a file given
    (None when computed); a name that is no file given is refused, naming it."""
    if not isinstance(url, str):
        return None
    if lookup(files, url) is None:
        raise TemplateError(
            path,
            f"{url!r} is not a file given with the stack: this control plane fetches no URL, so "
            "TemplateURL names a file in the request's files (the CLI sends a local path's file)",
        )
    return {"get_file": url}


def source_of(template: Any, files: Mapping[str, str], path: str) -> tuple[str, Any] | None:
    """(label, template map) of a literal ``template`` (text or ``get_file``); None when computed."""
    label = "inline"
    call = call_of(template)
    if call is not None:
        key = lookup(files, call[1]) if call[0] == "get_file" and isinstance(call[1], str) else None
        if key is None:
            return None  # computed, or a missing file the get_file check names
        template, label = files[key], key
    if not isinstance(template, str):
        return None
    source = load_yaml(template, path)
    if not isinstance(source, Mapping):
        raise TemplateError(path, "the template is not a map of sections")
    return label, canonical(source, "")


def check_stack(
    name: str,
    props: Mapping[str, Any],
    path: str,
    scope: tuple[Mapping[str, str], Environment, Nesting],
    parse: Parse,
) -> tuple[str, frozenset[str]] | None:
    """Parse a literal ``template`` (CFN: ``TemplateURL``) one level deeper and check its
    ``parameters`` (``Parameters``) against it: (its label, its output names); None when computed."""
    files, env, nesting = scope
    cfn = "TemplateURL" in props
    where = at(path, "TemplateURL" if cfn else "template")
    given = cfn_template(props["TemplateURL"], files, where) if cfn else props.get("template")
    found = source_of(given, files, where)
    if found is None:
        return None
    label, source = found
    if nesting.depth + 1 > nesting.max_depth:
        raise TemplateError(
            where,
            f"the stack would nest {nesting.depth + 1} deep, more than the limit of "
            f"{nesting.max_depth} (anneal serve --max-nested-depth)",
        )
    inner = child_environment(env, name)
    try:
        nested = parse(source, files, inner, nesting.deeper())
    except TemplateError as e:
        raise TemplateError(where, f"in template {label}: {e}") from e
    params_key = "Parameters" if cfn else "parameters"
    params = props.get(params_key)
    if params is None or (isinstance(params, Mapping) and call_of(params) is None):
        check_properties(nested, label, dict(params or {}), at(path, params_key), inner)
    return label, frozenset(nested.outputs)


def check_outputs_attribute(
    rtype: str, outputs: tuple[str, frozenset[str]], attribute: str, path: str
) -> None:
    """AWS::CloudFormation::Stack's ``Outputs.NAME``: NAME is an output of its template (Heat
    finds out at the stack's create, failing it; here the create is refused, naming the path)."""
    name = attribute.partition(".")[2]
    label, names = outputs
    if rtype != CFN_STACK or not attribute.startswith("Outputs.") or name in names:
        return
    raise TemplateError(
        path,
        f"get_attr: template {label} has no output {name!r}; its outputs: {', '.join(sorted(names)) or 'none'}",
    )
