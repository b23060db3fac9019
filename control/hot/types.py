"""The resource types Anneal supports: their properties, attributes and update policies.

To support a new type, add a TypeSpec to TYPES (``schema`` has the checks that use it). A
type's own checks, beyond what its property schemas say, are here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.hot import ec2, heatstack, retry
from control.hot.ec2 import EC2_INSTANCE
from control.hot.errors import TemplateError, at
from control.hot.functions import call_of
from control.hot.groups import CANARY, GROUP_TYPES, ON_FAILURE
from control.hot.schema import PropSpec, TypeSpec, is_integer


def _s(**kw: Any) -> PropSpec:
    return PropSpec("string", **kw)


IO_TYPES = ("String", "Number", "CommaDelimitedList", "Json", "Boolean")
INPUT_SCHEMA = {
    "name": _s(required=True),
    "description": _s(),
    "type": _s(allowed=IO_TYPES),
    "default": PropSpec("any"),
    "replace_on_change": PropSpec("boolean"),
    "secret": PropSpec("boolean"),  # Anneal's extension: sealed to the server's key
}
OUTPUT_SCHEMA = {
    "name": _s(required=True),
    "description": _s(),
    "type": _s(allowed=IO_TYPES),
    "error_output": PropSpec("boolean"),
    "secret": PropSpec("boolean"),  # Anneal's extension: the returned value is kept as a secret
}
ACTIONS = ("CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME")
SIGNAL_TRANSPORTS = ("CFN_SIGNAL", "HTTP", "NO_SIGNAL", "TEMP_URL_SIGNAL", "HEAT_SIGNAL", "ZAQAR_SIGNAL")
CONFIG_TRANSPORTS = (
    "POLL_SERVER_CFN",
    "POLL_SERVER_HEAT",
    "POLL_TEMP_URL",
    "ZAQAR_MESSAGE",
    "HTTP",
    "SWIFT",
    "S3",
    "LOCAL",
    "RELAY",
)
COMPUTE_PROPERTIES = (
    "image",
    "flavor",
    "key_name",
    "networks",
    "security_groups",
    "availability_zone",
    "config_drive",
    "block_device_mapping",
    "block_device_mapping_v2",
    "scheduler_hints",
    "admin_pass",
    "personality",
    "diskConfig",
    "flavor_update_policy",
    "image_update_policy",
    "reservation_id",
    "user_data_update_policy",
    "tags",
)
#: The types that are a server with an agent (control/resources/servers.py), for every stage.
SERVER_TYPES = ("OS::Heat::DeployedServer", "OS::Nova::Server", EC2_INSTANCE)
SERVER_ATTRIBUTES = frozenset(
    {"name", "os_collect_config", "networks", "addresses", "accessIPv4", "accessIPv6"}
)

_SERVER = {
    "name": _s(),
    "metadata": PropSpec("map", ignored=True),  # Nova's key/value metadata (not the resource's section)
    "software_config_transport": _s(allowed=CONFIG_TRANSPORTS),
    "deployment_swift_data": PropSpec("map", ignored=True),
}


HANDLE_TRANSPORTS = (
    "CFN_SIGNAL",
    "TEMP_URL_SIGNAL",
    "HEAT_SIGNAL",
    "NO_SIGNAL",
    "ZAQAR_SIGNAL",
    "TOKEN_SIGNAL",
)


def _check_wait(props: Mapping[Any, Any], path: str) -> None:
    """Heat's ranges: a timeout of 1..43200 seconds, a count of at least 1."""
    timeout = props.get("timeout", props.get("Timeout"))
    count = props.get("count", props.get("Count", 1))
    if call_of(timeout) is None and timeout is not None and not 1 <= float(timeout) <= 43200:
        raise TemplateError(
            at(path, "timeout" if "timeout" in props else "Timeout"), f"{timeout} is not in 1..43200"
        )
    if call_of(count) is None and count is not None and float(count) < 1:
        raise TemplateError(at(path, "count" if "count" in props else "Count"), f"{count} is less than 1")


def component_action_clash(configs: Any) -> tuple[int, str] | None:
    """(index, problem) when an action is in more than one of a component's configs."""
    seen: dict[Any, int] = {}
    for i, entry in enumerate(configs if isinstance(configs, list) else []):
        actions = entry.get("actions") if isinstance(entry, Mapping) else None
        if call_of(actions) is not None:
            continue
        for action in actions or ("CREATE", "UPDATE"):
            if isinstance(action, str) and action in seen:
                return i, (
                    f"action {action} is already in configs[{seen[action]}]; "
                    "a component may define only one config per action"
                )
            seen[action] = i
    return None


def _check_component(props: Mapping[Any, Any], path: str) -> None:
    if props.get("configs") == []:
        raise TemplateError(at(path, "configs"), "a component needs at least one config")
    clash = component_action_clash(props.get("configs"))
    if clash is not None:
        raise TemplateError(at(at(at(path, "configs"), clash[0]), "actions"), clash[1])


RANDOM_CLASSES = ("lettersdigits", "letters", "lowercase", "uppercase", "digits", "hexdigits", "octdigits")
RANDOM_MAX_LENGTH = 512


def random_minimum(props: Mapping[Any, Any]) -> int:
    """How many characters a RandomString's classes and sequences ask for at least."""
    total = 0
    for key in ("character_classes", "character_sequences"):
        for entry in props.get(key) or []:
            if isinstance(entry, Mapping) and is_integer(entry.get("min", 1)):
                total += int(entry.get("min", 1))
    return total


def _check_random(props: Mapping[Any, Any], path: str) -> None:
    length = props.get("length", 32)
    if call_of(length) is not None or not is_integer(length):
        return
    if not 1 <= int(length) <= RANDOM_MAX_LENGTH:
        raise TemplateError(at(path, "length"), f"{length} is not in 1..{RANDOM_MAX_LENGTH}")
    for key in ("character_classes", "character_sequences"):
        for i, entry in enumerate(props.get(key) or []):
            low = entry.get("min", 1) if isinstance(entry, Mapping) else 1
            if is_integer(low) and not 1 <= int(low) <= RANDOM_MAX_LENGTH:
                raise TemplateError(at(at(at(path, key), i), "min"), f"is not in 1..{RANDOM_MAX_LENGTH}")
            if key == "character_sequences" and isinstance(entry, Mapping):
                seq = entry.get("sequence")
                if isinstance(seq, str) and not seq:
                    raise TemplateError(at(at(at(path, key), i), "sequence"), "must not be empty")
    if random_minimum(props) > int(length):
        raise TemplateError(
            at(path, "length"),
            f"{length} is shorter than the {random_minimum(props)} characters the "
            "character_classes and character_sequences minimums ask for",
        )


_CONFIG_IO = {
    "options": PropSpec("map", update="replace"),
    "inputs": PropSpec("list", update="replace", schema=INPUT_SCHEMA),
    "outputs": PropSpec("list", update="replace", schema=OUTPUT_SCHEMA),
}
_DEPLOYMENT = {
    "config": _s(),
    "server": _s(required=True, update="replace"),
    "input_values": PropSpec("map"),
    "actions": PropSpec("list", default=["CREATE", "UPDATE"], allowed=ACTIONS),
    "name": _s(),
    "signal_transport": _s(allowed=SIGNAL_TRANSPORTS, update="replace"),
    "timeout": PropSpec("number"),
    "retry": retry.SPEC,
}
_STRUCTURED = {
    "input_key": _s(default="get_input"),
    "input_values_validate": _s(default="LAX", allowed=("LAX", "STRICT")),
}
_GROUP = {k: v for k, v in _DEPLOYMENT.items() if k != "server"} | {"servers": PropSpec("map", required=True)}
_BATCH = {"max_batch_size": PropSpec("integer", default=1), "pause_time": PropSpec("number", default=0)}
GROUP_UPDATE_POLICY = {
    "rolling_update": PropSpec("map", schema=_BATCH),
    "batch_create": PropSpec("map", schema=_BATCH),
    "canary": PropSpec("map", schema=CANARY),
    "on_failure": ON_FAILURE,
}


TYPES: Mapping[str, TypeSpec] = {
    t.name: t
    for t in (
        TypeSpec(
            "OS::Heat::SoftwareConfig",
            {
                "group": _s(default="Heat::Ungrouped", update="replace"),
                "config": PropSpec("any", update="replace"),
                "options": PropSpec("map", update="replace"),
                "inputs": PropSpec("list", update="replace", schema=INPUT_SCHEMA),
                "outputs": PropSpec("list", update="replace", schema=OUTPUT_SCHEMA),
            },
            frozenset({"config"}),
        ),
        TypeSpec("OS::Heat::SoftwareDeployment", _DEPLOYMENT, None, check=retry.check),
        TypeSpec("OS::Heat::StructuredDeployment", _DEPLOYMENT | _STRUCTURED, None, check=retry.check),
        TypeSpec(
            "OS::Heat::SoftwareDeploymentGroup",
            _GROUP,
            None,
            check=retry.check,
            update_policy=GROUP_UPDATE_POLICY,
        ),
        TypeSpec(
            "OS::Heat::StructuredDeploymentGroup",
            _GROUP | _STRUCTURED,
            None,
            check=retry.check,
            update_policy=GROUP_UPDATE_POLICY,
        ),
        TypeSpec(
            "OS::Heat::StructuredConfig",
            {
                "group": _s(default="Heat::Ungrouped", update="replace"),
                "config": PropSpec("map", update="replace"),
                **_CONFIG_IO,
            },
            frozenset({"config"}),
        ),
        TypeSpec(
            "OS::Heat::SoftwareComponent",
            {
                "configs": PropSpec(
                    "list",
                    required=True,
                    update="replace",
                    schema={
                        "actions": PropSpec("list"),
                        "config": PropSpec("any"),
                        "tool": _s(required=True),
                    },
                ),
                **_CONFIG_IO,
            },
            frozenset({"config", "configs"}),
            check=_check_component,
        ),
        TypeSpec(
            "OS::Heat::CloudConfig",
            {"cloud_config": PropSpec("map", update="replace")},
            frozenset({"config"}),
        ),
        TypeSpec(
            "OS::Heat::MultipartMime",
            {
                "parts": PropSpec(
                    "list",
                    update="replace",
                    schema={
                        "config": _s(required=True),
                        "filename": _s(),
                        "type": _s(allowed=("text", "multipart")),
                        "subtype": _s(),
                    },
                ),
                "group": _s(default="Heat::Ungrouped", update="replace"),
            },
            frozenset({"config"}),
        ),
        TypeSpec(
            "OS::Heat::RandomString",
            {
                "length": PropSpec("integer", default=32),
                "sequence": _s(allowed=RANDOM_CLASSES),
                "character_classes": PropSpec(
                    "list",
                    schema={"class": _s(allowed=RANDOM_CLASSES), "min": PropSpec("integer", default=1)},
                ),
                "character_sequences": PropSpec(
                    "list",
                    schema={"sequence": _s(required=True), "min": PropSpec("integer", default=1)},
                ),
                "salt": _s(),
            },
            frozenset({"value"}),
            check=_check_random,
        ),
        TypeSpec(
            "OS::Heat::DeployedServer",
            _SERVER,
            SERVER_ATTRIBUTES,
        ),
        TypeSpec(
            "OS::Nova::Server",
            {
                **_SERVER,
                "user_data_format": _s(allowed=("HEAT_CFNTOOLS", "RAW", "SOFTWARE_CONFIG"), update="replace"),
                "user_data": PropSpec("any", ignored=True),
                **{name: PropSpec("any", ignored=True) for name in COMPUTE_PROPERTIES},
            },
            SERVER_ATTRIBUTES | {"first_address", "instance_name", "show", "console_urls", "tags"},
        ),
        ec2.SPEC,
        TypeSpec(
            "OS::Heat::WaitConditionHandle",
            {"signal_transport": _s(default="TOKEN_SIGNAL", allowed=HANDLE_TRANSPORTS, update="replace")},
            frozenset({"token", "endpoint", "curl_cli", "signal"}),
        ),
        TypeSpec(
            "OS::Heat::WaitCondition",
            {
                "handle": _s(required=True),
                "timeout": PropSpec("number", required=True),
                "count": PropSpec("integer", default=1),
            },
            frozenset({"data"}),
            check=_check_wait,
        ),
        TypeSpec("AWS::CloudFormation::WaitConditionHandle", {}, frozenset()),
        TypeSpec(
            "AWS::CloudFormation::WaitCondition",
            {
                "Handle": _s(required=True),
                "Timeout": PropSpec("number", required=True),
                "Count": PropSpec("number", default=1),
            },
            frozenset({"Data"}),
            check=_check_wait,
        ),
        TypeSpec("OS::Heat::None", {}, None, open_properties=True),
        TypeSpec(
            "OS::Heat::Value",
            {
                "value": PropSpec("any", required=True),
                "type": _s(allowed=("string", "number", "comma_delimited_list", "json", "boolean")),
            },
            frozenset({"value"}),
        ),
        *GROUP_TYPES.values(),
        heatstack.SPEC,
        heatstack.CFN_SPEC,
        TypeSpec(
            "OS::Heat::TestResource",
            {
                "value": _s(default="test_string"),
                "update_replace": PropSpec("boolean", default=False),
                "update_replace_value": _s(update="replace"),
                "fail": PropSpec("boolean", default=False),
                # Heat's test knobs for slow actions and clients: nothing here is slow or has a client.
                "wait_secs": PropSpec("number", default=0, ignored=True),
                "action_wait_secs": PropSpec("map", ignored=True),
                "attr_wait_secs": PropSpec("number", default=0, ignored=True),
                "client_name": _s(ignored=True),
                "entity_name": _s(ignored=True),
                "constraint_prop_secs": PropSpec("number", default=0, ignored=True),
            },
            frozenset({"output"}),
        ),
    )
}
# Heat's older names for the groups, still accepted (hidden aliases there too).
ALIASES = {
    "OS::Heat::SoftwareDeployments": "OS::Heat::SoftwareDeploymentGroup",
    "OS::Heat::StructuredDeployments": "OS::Heat::StructuredDeploymentGroup",
}
