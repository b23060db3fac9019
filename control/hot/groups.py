"""Groups of one member definition: OS::Heat::ResourceGroup, OS::Heat::AutoScalingGroup and its
OS::Heat::ScalingPolicy, and the older OS::Heat::InstanceGroup and AWS::AutoScaling types.

Their property schemas, and the parse-time check of the member definition: the member
type (a type or a template, after the registry) and its properties are checked as a
resource of the group's nested stack would be, one level deeper.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.hot.environment import Environment, child_environment, map_type
from control.hot.errors import TemplateError, at, show
from control.hot.files import is_template_ref
from control.hot.functions import call_of
from control.hot.nesting import Nesting, Parse, parse_nested
from control.hot.nesting import check_properties as check_nested_properties
from control.hot.schema import PropSpec, TypeSpec, check_properties, is_integer

RESOURCE_GROUP = "OS::Heat::ResourceGroup"
AUTO_SCALING_GROUP = "OS::Heat::AutoScalingGroup"
SCALING_POLICY = "OS::Heat::ScalingPolicy"
INSTANCE_GROUP = "OS::Heat::InstanceGroup"
LAUNCH_CONFIGURATION = "AWS::AutoScaling::LaunchConfiguration"
AWS_SCALING_GROUP = "AWS::AutoScaling::AutoScalingGroup"
AWS_SCALING_POLICY = "AWS::AutoScaling::ScalingPolicy"
#: The AWS policy's AdjustmentType, as the OS policy's adjustment_type.
AWS_ADJUSTMENT_TYPES = {
    "ChangeInCapacity": "change_in_capacity",
    "ExactCapacity": "exact_capacity",
    "PercentChangeInCapacity": "percent_change_in_capacity",
}
#: A launch configuration's properties, as the member servers' OS::Nova::Server properties.
LAUNCH_TO_SERVER = {
    "ImageId": "image",
    "InstanceType": "flavor",
    "KeyName": "key_name",
    "UserData": "user_data",
    "SecurityGroups": "security_groups",
    "BlockDeviceMappings": "block_device_mapping",
    "NovaSchedulerHints": "scheduler_hints",
    "Metadata": "metadata",
}
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
#: A group's canary (control/resources/canary.py checks the ranges).
CANARY = {
    "count": PropSpec("integer"),
    "percent": PropSpec("number"),
    "pause": PropSpec("number", default=0),
    "success": PropSpec(
        "map", schema={"min_complete": PropSpec("integer"), "max_failed": PropSpec("integer", default=0)}
    ),
}


def canary_terms(given: Mapping[Any, Any], path: str) -> dict[str, Any]:
    """A canary's terms as written, checked: ``count`` or ``percent``, ``pause``, ``max_failed``
    and ``min_complete`` (None: its default, which depends on the canary's size)."""
    count, percent = given.get("count"), given.get("percent")
    if (count is None) == (percent is None):
        raise TemplateError(path, "give one of count or percent")
    if count is not None and not (_whole(count) and count >= 1):
        raise TemplateError(at(path, "count"), f"{show(count)} is not an integer >= 1")
    if percent is not None and not (_real(percent) and 0 < percent <= 100):
        raise TemplateError(at(path, "percent"), f"{show(percent)} is not a number in (0, 100]")
    pause = given.get("pause") or 0
    if not (_real(pause) and pause >= 0):
        raise TemplateError(at(path, "pause"), f"{show(pause)} is not a number of seconds >= 0")
    success = given.get("success") or {}
    terms = {"count": count, "percent": percent, "pause": float(pause), "min_complete": None, "max_failed": 0}
    for key in ("max_failed", "min_complete"):
        value = success.get(key, terms[key])
        if value is not None and not (_whole(value) and value >= 0):
            raise TemplateError(at(at(path, "success"), key), f"{show(value)} is not an integer >= 0")
        terms[key] = value
    return terms


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: What a failed canary or batch does to the stack: ``stop`` fails it; ``rollback`` rolls it back.
ON_FAILURE = PropSpec("string", default="stop", allowed=("stop", "rollback"))


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


def _check_size(props: Mapping[Any, Any], path: str) -> None:
    size = _literal(props, "Size")
    if size is not None and size < 0:
        raise TemplateError(at(path, "Size"), f"{size} is negative")


def _check_aws_scaling(props: Mapping[Any, Any], path: str) -> None:
    _check_scaling(
        {
            k: props.get(c)
            for k, c in (
                ("min_size", "MinSize"),
                ("max_size", "MaxSize"),
                ("desired_capacity", "DesiredCapacity"),
            )
        },
        path,
    )


def _check_policy(props: Mapping[Any, Any], path: str) -> None:
    step = props.get("min_adjustment_step")
    if step is not None and props.get("adjustment_type") != "percent_change_in_capacity":
        raise TemplateError(
            at(path, "min_adjustment_step"), "applies only with adjustment_type percent_change_in_capacity"
        )


#: The CloudFormation rolling update of instance groups (RollingUpdate, AutoScalingRollingUpdate).
AWS_ROLLING = PropSpec(
    "map",
    schema={
        "MinInstancesInService": PropSpec("integer", default=0),
        "MaxBatchSize": PropSpec("integer", default=1),
        "PauseTime": PropSpec("string", default="PT0S"),
    },
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
            "canary": PropSpec("map", schema=CANARY),
            "on_failure": ON_FAILURE,
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
    INSTANCE_GROUP: TypeSpec(
        INSTANCE_GROUP,
        {
            "LaunchConfigurationName": PropSpec("string", required=True),
            "Size": PropSpec("integer", required=True),
            "AvailabilityZones": PropSpec("list", ignored=True),
            "LoadBalancerNames": PropSpec("list", ignored=True),
            "Tags": PropSpec("list", schema={"Key": PropSpec("string"), "Value": PropSpec("string")}),
        },
        frozenset({"InstanceList"}),
        check=_check_size,
        update_policy={"RollingUpdate": AWS_ROLLING},
    ),
    AWS_SCALING_GROUP: TypeSpec(
        AWS_SCALING_GROUP,
        {
            "LaunchConfigurationName": PropSpec("string", required=True),
            "MinSize": PropSpec("integer", required=True),
            "MaxSize": PropSpec("integer", required=True),
            "DesiredCapacity": PropSpec("integer"),
            "Cooldown": PropSpec("integer"),
            "AvailabilityZones": PropSpec("list", ignored=True),
            "LoadBalancerNames": PropSpec("list", ignored=True),
            "VPCZoneIdentifier": PropSpec("list", ignored=True),
            "HealthCheckGracePeriod": PropSpec("integer", ignored=True),
            "HealthCheckType": PropSpec("string", ignored=True),
            "InstanceId": PropSpec("string", ignored=True),
            "Tags": PropSpec("list", schema={"Key": PropSpec("string"), "Value": PropSpec("string")}),
        },
        frozenset({"InstanceList"}),
        check=_check_aws_scaling,
        update_policy={"AutoScalingRollingUpdate": AWS_ROLLING},
    ),
    AWS_SCALING_POLICY: TypeSpec(
        AWS_SCALING_POLICY,
        {
            "AutoScalingGroupName": PropSpec("string", required=True),
            "ScalingAdjustment": PropSpec("number", required=True),
            "AdjustmentType": PropSpec("string", required=True, allowed=tuple(AWS_ADJUSTMENT_TYPES)),
            "Cooldown": PropSpec("number"),
            "MinAdjustmentStep": PropSpec("integer"),
        },
        frozenset({"AlarmUrl"}),
    ),
    LAUNCH_CONFIGURATION: TypeSpec(
        LAUNCH_CONFIGURATION,
        {
            **{name: PropSpec("any") for name in LAUNCH_TO_SERVER},
            "KernelId": PropSpec("string", ignored=True),
            "RamDiskId": PropSpec("string", ignored=True),
            "InstanceId": PropSpec("string", ignored=True),
        },
        frozenset(),
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
