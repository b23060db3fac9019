"""OS::Heat::InstanceGroup, AWS::AutoScaling::AutoScalingGroup, ScalingPolicy and LaunchConfiguration.

An InstanceGroup is a scaling group (control/resources/scaling.py) of fixed ``Size`` whose
members are servers made from its launch configuration: the configuration's ``ImageId``,
``InstanceType``, ``KeyName``, ``UserData``... become each member's OS::Nova::Server
properties (accepted and ignored there, each named in a warning, as for any adopted server),
the group's ``Tags`` its Nova ``metadata``. ``InstanceList`` is the members' first addresses,
comma-separated (Heat's is their IPs). A launch configuration is replaced by any change, as
in Heat, so the group's ``LaunchConfigurationName`` changes and the group replaces its
members (new servers, the old ones deleted), in batches of ``update_policy.RollingUpdate``.

AWS::AutoScaling::AutoScalingGroup is an InstanceGroup sized ``MinSize``..``MaxSize``
(starting at ``DesiredCapacity``, else ``MinSize``) that its AWS::AutoScaling::ScalingPolicy
resizes: the policy's ``AlarmUrl`` (or ``anneal stack resource signal``) adjusts it by
``ScalingAdjustment`` of ``AdjustmentType``, through the OS scaling group's machinery.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import or_, select

from control import hot
from control.hot.groups import (
    AWS_ADJUSTMENT_TYPES,
    AWS_SCALING_GROUP,
    AWS_SCALING_POLICY,
    INSTANCE_GROUP,
    LAUNCH_CONFIGURATION,
    LAUNCH_TO_SERVER,
)
from control.resources import nested, scaling
from control.resources.base import REPLACE, Outcome, Res, done
from control.store.orm import ResourceRow
from control.txn import Txn

__all__ = [
    "AWS_SCALING_GROUP",
    "AWS_SCALING_POLICY",
    "INSTANCE_GROUP",
    "LAUNCH_CONFIGURATION",
    "AwsScalingGroup",
    "AwsScalingPolicy",
    "InstanceGroup",
    "LaunchConfiguration",
    "read",
]
#: The member attribute InstanceList reads (as the parent's get_attr would ask the scaling group).
ADDRESSES = ["outputs", "first_address"]
_DURATION = re.compile(r"^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?$")


def read(attributes: Mapping[str, Any], name: str, path: list[Any]) -> Any:
    """``get_attr: [group, InstanceList]``: the members' first addresses, comma-separated."""
    if name != "InstanceList":
        return None
    found = scaling.read(attributes, "outputs_list", ADDRESSES[1:])
    return hot.select(",".join(str(a or "") for a in found or []), path)


def pause_seconds(value: Any, where: str) -> float:
    """An ISO 8601 duration as CloudFormation writes PauseTime (``PT1M30S``), in seconds."""
    match = _DURATION.match(str(value or "PT0S"))
    if match is None:
        raise hot.TemplateError(where, f"{value!r} is not a duration such as PT0S or PT1M30S")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


class LaunchConfiguration:
    """What an InstanceGroup's members are made from: only its properties, read by the group."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        return done(f"{res.stack.name}-{res.name}-{nested.short_id()}")

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        return REPLACE  # Heat's launch configurations have no updatable property

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return done()


class InstanceGroup(scaling.AutoScalingGroup):
    """A scaling group of ``Size`` servers made from a launch configuration."""

    replaces = True  # Heat's instance groups replace a member for a new launch configuration

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        return await super().create(txn, res, await self._as_scaling(txn, res, props))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        return await super().update(txn, res, row, await self._as_scaling(txn, res, props))

    def plan(
        self, res: Res, props: Mapping[str, Any], row: ResourceRow | None, old: Mapping[str, Any]
    ) -> dict[str, Any]:
        plan = super().plan(res, props, row, old)
        if "InstanceList" in res.reads and ADDRESSES not in (plan["wants"] or []):
            plan["wants"] = [*(plan["wants"] or []), ADDRESSES]
        return plan

    rolling_key = "RollingUpdate"

    def sizes(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """min_size, max_size, desired_capacity and cooldown: a fixed ``Size``."""
        size = int(props.get("Size") or 0)
        return {"min_size": size, "max_size": size, "desired_capacity": size}

    def limits(self, res: Res, props: Mapping[str, Any]) -> tuple[int, int, Any]:
        sizes = self.sizes(props)
        return sizes["min_size"], sizes["max_size"], sizes.get("cooldown")

    async def _as_scaling(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> dict[str, Any]:
        """The group's properties as a scaling group's: fixed size, members from the configuration."""
        where = f"{res.where}.properties"
        ref = str(props.get("LaunchConfigurationName") or "")
        config = await txn.session.scalar(
            select(ResourceRow).where(
                ResourceRow.stack_id == res.stack.id,
                ResourceRow.current.is_(True),
                ResourceRow.type == LAUNCH_CONFIGURATION,
                or_(ResourceRow.physical_id == ref, ResourceRow.name == ref),
            )
        )
        if config is None:
            raise hot.TemplateError(
                f"{where}.LaunchConfigurationName", f"{ref!r} is no {LAUNCH_CONFIGURATION} of this stack"
            )
        given = config.properties or {}
        server = {LAUNCH_TO_SERVER[k]: v for k, v in given.items() if k in LAUNCH_TO_SERVER and v is not None}
        tags = {str(t.get("Key")): t.get("Value") for t in props.get("Tags") or [] if isinstance(t, Mapping)}
        if tags:
            server["metadata"] = {**dict(server.get("metadata") or {}), **tags}
        rolling = dict(res.update_policy.get(self.rolling_key) or {})
        where = f"{res.where}.update_policy.{self.rolling_key}.PauseTime"
        pause = pause_seconds(rolling.get("PauseTime"), where)
        return {
            "resource": {"type": "OS::Nova::Server", "properties": server},
            **self.sizes(props),
            "rolling_updates": {
                "min_in_service": int(rolling.get("MinInstancesInService") or 0),
                "max_batch_size": int(rolling.get("MaxBatchSize") or 1),
                "pause_time": pause,
            },
        }


class AwsScalingGroup(InstanceGroup):
    """An InstanceGroup sized MinSize..MaxSize that its AWS scaling policies resize."""

    rolling_key = "AutoScalingRollingUpdate"

    def sizes(self, props: Mapping[str, Any]) -> dict[str, Any]:
        given = {"desired_capacity": "DesiredCapacity", "cooldown": "Cooldown"}
        low, high = int(props.get("MinSize") or 0), int(props.get("MaxSize") or 0)
        return {"min_size": low, "max_size": high} | {
            k: int(props[c]) for k, c in given.items() if props.get(c) is not None
        }


class AwsScalingPolicy(scaling.ScalingPolicy):
    """AWS::AutoScaling::ScalingPolicy: its ``AlarmUrl`` adjusts its AWS scaling group."""

    group_key, group_type = "AutoScalingGroupName", AWS_SCALING_GROUP
    scaler = AwsScalingGroup()

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        physical_id = nested.short_id()
        return done(physical_id, AlarmUrl=scaling.urls(txn, res, physical_id)["alarm_url"])

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        return done(row.physical_id, AlarmUrl=scaling.urls(txn, res, row.physical_id or "")["alarm_url"])

    def terms(self, props: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        return str(props.get("AutoScalingGroupName") or ""), {
            "adjustment": float(props.get("ScalingAdjustment", 0)),
            "type": AWS_ADJUSTMENT_TYPES.get(str(props.get("AdjustmentType")), "change_in_capacity"),
            "min_step": props.get("MinAdjustmentStep"),
            "cooldown": props.get("Cooldown"),
        }
