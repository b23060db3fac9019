"""Groups of one member definition: OS::Heat::ResourceGroup, OS::Heat::AutoScalingGroup and its
OS::Heat::ScalingPolicy.

Their property schemas, and the parse-time check of the member definition: the member
type (a type or a template, after the registry) and its properties are checked as a
resource of the group's nested stack would be, one level deeper.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.hot.environment import Environment, child_environment, map_type
from control.hot.errors import TemplateError, at
from control.hot.files import is_template_ref
from control.hot.functions import call_of
from control.hot.nesting import Nesting, Parse, parse_nested
from control.hot.nesting import check_properties as check_nested_properties
from control.hot.schema import PropSpec, TypeSpec, check_properties, is_integer

RESOURCE_GROUP = "OS::Heat::ResourceGroup"
AUTO_SCALING_GROUP = "OS::Heat::AutoScalingGroup"
SCALING_POLICY = "OS::Heat::ScalingPolicy"
ADJUSTMENT_TYPES = ("change_in_capacity", "exact_capacity", "percent_change_in_capacity")
#: Member definitions: a resource as it would be written in a template.
MEMBER = {
    "type": PropSpec("string", required=True),
    "properties": PropSpec("map"),
    "metadata": PropSpec("map"),
}
ROLLING = {
    "min_in_service": PropSpec("integer", default=0),
    "max_batch_size": PropSpec("integer", default=1),
    "pause_time": PropSpec("number", default=0),
}


def _check_group(props: Mapping[Any, Any], path: str) -> None:
    count = props.get("count", 1)
    if is_integer(count) and int(count) < 0:
        raise TemplateError(at(path, "count"), f"{count} is negative")
    index_var = props.get("index_var")
    if isinstance(index_var, str) and len(index_var) < 3:
        raise TemplateError(at(path, "index_var"), "must be at least 3 characters (Heat's rule)")


def _literal(props: Mapping[Any, Any], key: str) -> int | None:
    value = props.get(key)
    return int(value) if value is not None and is_integer(value) else None


def _check_scaling(props: Mapping[Any, Any], path: str) -> None:
    low, high, desired = (_literal(props, k) for k in ("min_size", "max_size", "desired_capacity"))
    if low is not None and low < 0:
        raise TemplateError(at(path, "min_size"), f"{low} is negative")
    if low is not None and high is not None and high < low:
        raise TemplateError(at(path, "max_size"), f"{high} is below min_size {low}")
    if desired is not None and ((low is not None and desired < low) or (high is not None and desired > high)):
        raise TemplateError(at(path, "desired_capacity"), f"{desired} is not within min_size .. max_size")


def _check_policy(props: Mapping[Any, Any], path: str) -> None:
    step = props.get("min_adjustment_step")
    if step is not None and props.get("adjustment_type") != "percent_change_in_capacity":
        raise TemplateError(
            at(path, "min_adjustment_step"), "applies only with adjustment_type percent_change_in_capacity"
        )


GROUP_TYPES: Mapping[str, TypeSpec] = {
    RESOURCE_GROUP: TypeSpec(
        RESOURCE_GROUP,
        {
            "count": PropSpec("integer", default=1),
            "index_var": PropSpec("string", default="%index%"),
            "resource_def": PropSpec("map", required=True, schema=MEMBER),
            "removal_policies": PropSpec("list", default=[], schema={"resource_list": PropSpec("list")}),
            "removal_policies_mode": PropSpec("string", default="append", allowed=("append", "update")),
        },
        None,  # refs, refs_map, attributes, removed_rsrc_list, resource.<n>[.<attr>], any member's
        check=_check_group,
        update_policy={
            "rolling_update": PropSpec("map", schema=ROLLING),
            "batch_create": PropSpec("map", schema={k: ROLLING[k] for k in ("max_batch_size", "pause_time")}),
        },
    ),
    AUTO_SCALING_GROUP: TypeSpec(
        AUTO_SCALING_GROUP,
        {
            "resource": PropSpec("map", required=True, schema=MEMBER),
            "min_size": PropSpec("integer", required=True),
            "max_size": PropSpec("integer", required=True),
            "desired_capacity": PropSpec("integer"),
            "cooldown": PropSpec("integer"),
            "rolling_updates": PropSpec("map", schema=ROLLING),
        },
        frozenset({"outputs", "outputs_list", "current_size", "refs", "refs_map"}),
        check=_check_scaling,
        update_policy={},
        attribute_prefixes=("resource.",),
    ),
    SCALING_POLICY: TypeSpec(
        SCALING_POLICY,
        {
            "auto_scaling_group_id": PropSpec("string", required=True),
            "scaling_adjustment": PropSpec("number", required=True),
            "adjustment_type": PropSpec("string", required=True, allowed=ADJUSTMENT_TYPES),
            "cooldown": PropSpec("number"),
            "min_adjustment_step": PropSpec("integer"),
        },
        frozenset({"alarm_url", "signal_url"}),
        check=_check_policy,
    ),
}
#: Which property holds a group type's member definition.
MEMBER_PROPERTY = {RESOURCE_GROUP: "resource_def", AUTO_SCALING_GROUP: "resource"}


def check_member(
    name: str,
    group_type: str,
    props: Mapping[str, Any],
    path: str,
    scope: tuple[Mapping[str, str], Environment, Mapping[str, TypeSpec], Nesting, list[str]],
    parse: Parse,
) -> None:
    """Check a group's literal member definition as a resource of the group's nested stack."""
    files, env, types, nesting, warnings = scope
    member = props.get(MEMBER_PROPERTY[group_type])
    if not isinstance(member, Mapping) or props.get("count") == 0 or call_of(member) is not None:
        return
    mtype = member.get("type")
    if not isinstance(mtype, str):
        return  # computed: checked when the group acts
    where = at(path, MEMBER_PROPERTY[group_type])
    index_var = props.get("index_var")
    mprops = substituted(
        member.get("properties") or {}, index_var if isinstance(index_var, str) else "%index%"
    )
    if not isinstance(mprops, Mapping):
        return
    if nesting.depth + 1 > nesting.max_depth:
        raise TemplateError(
            at(where, "type"),
            f"the group's members would nest stacks {nesting.depth + 1} deep, more than the limit of "
            f"{nesting.max_depth} (anneal serve --max-nested-depth)",
        )
    inner_env = child_environment(env, name)
    mapped = map_type(inner_env, mtype, "0")
    if mapped in types:
        check_properties(types[mapped], mprops, at(where, "properties"), warnings)
    elif is_template_ref(mapped, files):
        key, nested = parse_nested("0", mapped, at(where, "type"), files, inner_env, nesting.deeper(), parse)
        check_nested_properties(nested, key, mprops, at(where, "properties"), inner_env)
    else:
        raise TemplateError(at(where, "type"), f"type {mapped!r} is neither a supported type nor a template")


def substituted(value: Any, var: str, index: str = "0") -> Any:
    """*value* as member *index* gets it (its index variable replaced)."""
    if isinstance(value, str):
        return value.replace(var, index)
    if isinstance(value, Mapping):
        return {k: substituted(v, var, index) for k, v in value.items()}
    if isinstance(value, list):
        return [substituted(v, var, index) for v in value]
    return value
