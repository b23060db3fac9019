"""AWS::EC2::Instance: a server with an agent, as OS::Nova::Server is (control/resources/servers.py).

Every property Heat's type has asks a compute service for something (an image, a flavor, a
subnet...), so each is accepted and ignored with a warning. Its attributes are Heat's:
``PrivateIp``, ``PublicIp``, ``PrivateDnsName`` and ``PublicDnsName`` are all the server's first
address (as Heat answers them), from what its agent reports; ``AvailabilityZone`` the property's.
"""

from __future__ import annotations

from control.hot.schema import PropSpec, TypeSpec

EC2_INSTANCE = "AWS::EC2::Instance"
#: Heat's AWS::EC2::Instance properties.
EC2_PROPERTIES = (
    "ImageId",
    "InstanceType",
    "KeyName",
    "AvailabilityZone",
    "DisableApiTermination",
    "KernelId",
    "Monitoring",
    "PlacementGroupName",
    "PrivateIpAddress",
    "RamDiskId",
    "SecurityGroups",
    "SecurityGroupIds",
    "NetworkInterfaces",
    "SourceDestCheck",
    "SubnetId",
    "Tags",
    "NovaSchedulerHints",
    "Tenancy",
    "UserData",
    "Volumes",
    "BlockDeviceMappings",
)
EC2_ADDRESSES = frozenset({"PrivateIp", "PublicIp", "PrivateDnsName", "PublicDnsName"})

SPEC = TypeSpec(
    EC2_INSTANCE,
    {name: PropSpec("any", ignored=True) for name in EC2_PROPERTIES},
    EC2_ADDRESSES | {"AvailabilityZone"},
)
