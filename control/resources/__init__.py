"""Resource type handlers, one module per family; HANDLERS maps a type name to its handler."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from control import hot
from control.resources import instance_group, provider, resource_group, scaling
from control.resources.base import REPLACE, Checked, Composite, Handler, Nest, Outcome, Res, Suspendable, done
from control.resources.cloudconfig import CloudConfig, MultipartMime
from control.resources.groups import DeploymentGroup
from control.resources.heatstack import CFN_STACK, HEAT_STACK, CfnStack, HeatStack
from control.resources.randomstring import RandomString
from control.resources.servers import Nothing, Server, Value, create_server, remove_server
from control.resources.software import (
    SoftwareComponent,
    SoftwareConfig,
    SoftwareDeployment,
    forget_deployment,
)
from control.resources.structured import StructuredConfig, StructuredDeployment
from control.resources.testresource import TestResource
from control.resources.waits import WaitCondition, WaitConditionHandle

HANDLERS: Mapping[str, Handler] = {
    "OS::Heat::None": Nothing(),
    "OS::Heat::Value": Value(),
    "OS::Heat::TestResource": TestResource(),
    "OS::Heat::SoftwareConfig": SoftwareConfig(),
    "OS::Heat::SoftwareComponent": SoftwareComponent(),
    "OS::Heat::StructuredConfig": StructuredConfig(),
    "OS::Heat::CloudConfig": CloudConfig(),
    "OS::Heat::MultipartMime": MultipartMime(),
    "OS::Heat::SoftwareDeployment": SoftwareDeployment(),
    "OS::Heat::StructuredDeployment": StructuredDeployment(),
    "OS::Heat::SoftwareDeploymentGroup": DeploymentGroup(SoftwareDeployment()),
    "OS::Heat::StructuredDeploymentGroup": DeploymentGroup(StructuredDeployment()),
    "OS::Heat::RandomString": RandomString(),
    "OS::Heat::DeployedServer": Server(),
    "OS::Nova::Server": Server(),
    "AWS::EC2::Instance": Server(),
    resource_group.RESOURCE_GROUP: resource_group.ResourceGroup(),
    scaling.AUTO_SCALING_GROUP: scaling.AutoScalingGroup(),
    scaling.SCALING_POLICY: scaling.ScalingPolicy(),
    HEAT_STACK: HeatStack(),
    CFN_STACK: CfnStack(),
    instance_group.INSTANCE_GROUP: instance_group.InstanceGroup(),
    instance_group.LAUNCH_CONFIGURATION: instance_group.LaunchConfiguration(),
    instance_group.AWS_SCALING_GROUP: instance_group.AwsScalingGroup(),
    instance_group.AWS_SCALING_POLICY: instance_group.AwsScalingPolicy(),
    "OS::Heat::WaitConditionHandle": WaitConditionHandle(),
    "OS::Heat::WaitCondition": WaitCondition(),
    "AWS::CloudFormation::WaitConditionHandle": WaitConditionHandle(),
    "AWS::CloudFormation::WaitCondition": WaitCondition(aws=True),
}
#: Types whose resource row is one deployment (its physical id is the deployment's id).
DEPLOYMENT_TYPES = frozenset({"OS::Heat::SoftwareDeployment", "OS::Heat::StructuredDeployment"})
#: The handler of every template resource (its type is the template's key in the files).
TEMPLATE_RESOURCE = provider.TemplateResource()


def handler_for(type_name: str) -> Handler:
    """The handler of a resource type; a type that is no built-in one is a template (the parser
    accepts nothing else)."""
    return HANDLERS.get(type_name, TEMPLATE_RESOURCE)


def _capable(kind: type[Any]) -> Callable[[str], Any]:
    """``handler_for(type_name)`` if it is a *kind*, else None, worked out once per type: isinstance
    against a runtime-checkable Protocol costs microseconds, and a step asks it of each resource it
    holds (a group's nested stack, stepped as each batch of its members settles, of every member)."""
    table = {name: h if isinstance(h, kind) else None for name, h in HANDLERS.items()}
    template = TEMPLATE_RESOURCE if isinstance(TEMPLATE_RESOURCE, kind) else None
    return lambda type_name: table.get(type_name, template)


_checker, _suspender, _composite = _capable(Checked), _capable(Suspendable), _capable(Composite)


def checker_for(type_name: str) -> Checked | None:
    """The handler if it follows its own progress (asked while its resource is IN_PROGRESS)."""
    found: Checked | None = _checker(type_name)
    return found


def suspender_for(type_name: str) -> Suspendable | None:
    found: Suspendable | None = _suspender(type_name)
    return found


def composite_for(type_name: str) -> Composite | None:
    """The handler if its resource makes a nested stack."""
    found: Composite | None = _composite(type_name)
    return found


def read_attribute(type_name: str, attributes: Mapping[str, Any], name: str, path: list[Any]) -> Any:
    """``get_attr: [resource, name, *path]`` of a resource of *type_name* with these attributes."""
    if type_name not in HANDLERS:
        return provider.read(attributes, name, path)
    if type_name == resource_group.RESOURCE_GROUP:
        return resource_group.read(attributes, name, path)
    if type_name == scaling.AUTO_SCALING_GROUP:
        return scaling.read(attributes, name, path)
    if type_name in (instance_group.INSTANCE_GROUP, instance_group.AWS_SCALING_GROUP):
        return instance_group.read(attributes, name, path)
    return hot.select(attributes.get(name), path)


__all__ = [
    "DEPLOYMENT_TYPES",
    "HANDLERS",
    "REPLACE",
    "TEMPLATE_RESOURCE",
    "Handler",
    "Nest",
    "Outcome",
    "Res",
    "checker_for",
    "composite_for",
    "create_server",
    "done",
    "forget_deployment",
    "handler_for",
    "read_attribute",
    "remove_server",
    "suspender_for",
]
