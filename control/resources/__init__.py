"""Resource type handlers, one module per family; HANDLERS maps a type name to its handler."""

from __future__ import annotations

from collections.abc import Mapping

from control.resources.base import REPLACE, Handler, Outcome, Res, done
from control.resources.cloudconfig import CloudConfig, MultipartMime
from control.resources.groups import DeploymentGroup
from control.resources.randomstring import RandomString
from control.resources.servers import Nothing, Server, Value, create_server, remove_server
from control.resources.software import (
    SoftwareComponent,
    SoftwareConfig,
    SoftwareDeployment,
    forget_deployment,
)
from control.resources.structured import StructuredConfig, StructuredDeployment
from control.resources.waits import WaitCondition, WaitConditionHandle

HANDLERS: Mapping[str, Handler] = {
    "OS::Heat::None": Nothing(),
    "OS::Heat::Value": Value(),
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
    "OS::Heat::WaitConditionHandle": WaitConditionHandle(),
    "OS::Heat::WaitCondition": WaitCondition(),
    "AWS::CloudFormation::WaitConditionHandle": WaitConditionHandle(),
    "AWS::CloudFormation::WaitCondition": WaitCondition(aws=True),
}
#: Types whose resource row is one deployment (its physical id is the deployment's id).
DEPLOYMENT_TYPES = frozenset({"OS::Heat::SoftwareDeployment", "OS::Heat::StructuredDeployment"})

__all__ = [
    "DEPLOYMENT_TYPES",
    "HANDLERS",
    "REPLACE",
    "Handler",
    "Outcome",
    "Res",
    "create_server",
    "done",
    "forget_deployment",
    "remove_server",
]
