"""Resource type handlers, one module per family; HANDLERS maps a type name to its handler."""

from __future__ import annotations

from collections.abc import Mapping
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


def checker_for(type_name: str) -> Checked | None:
    """The handler if it follows its own progress (asked while its resource is IN_PROGRESS)."""
    return _CHECKERS.get(type_name, _TEMPLATE_CHECKER)


#: ``checker_for`` of each built-in type and of a template, found once: isinstance against a
#: runtime-checkable Protocol costs microseconds, and a step asks it of each resource it holds
#: (a group's nested stack, stepped as each batch of its members settles, of every member each time).
_CHECKERS = {name: h if isinstance(h, Checked) else None for name, h in HANDLERS.items()}
_TEMPLATE_CHECKER = TEMPLATE_RESOURCE if isinstance(TEMPLATE_RESOURCE, Checked) else None
#: The same for ``suspender_for`` and ``composite_for`` (a create's walk asks the latter of each resource).
_SUSPENDERS = {name: h if isinstance(h, Suspendable) else None for name, h in HANDLERS.items()}
_TEMPLATE_SUSPENDER = TEMPLATE_RESOURCE if isinstance(TEMPLATE_RESOURCE, Suspendable) else None
_COMPOSITES = {name: h if isinstance(h, Composite) else None for name, h in HANDLERS.items()}
_TEMPLATE_COMPOSITE = TEMPLATE_RESOURCE if isinstance(TEMPLATE_RESOURCE, Composite) else None


def suspender_for(type_name: str) -> Suspendable | None:
    return _SUSPENDERS.get(type_name, _TEMPLATE_SUSPENDER)


def composite_for(type_name: str) -> Composite | None:
    """The handler if its resource makes a nested stack."""
    return _COMPOSITES.get(type_name, _TEMPLATE_COMPOSITE)


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
