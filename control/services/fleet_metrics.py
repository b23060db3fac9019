"""The fleet-wide gauges of /metrics, read from the database at scrape time.

One grouped query each for deployments, servers and stacks: a scrape costs three
aggregate reads, whatever the fleet's size, and nothing on the request paths.
"""

from __future__ import annotations

import time

from sqlalchemy import case, func, select

from control.metrics import AGENT_STATES, FleetCounts
from control.runtime import Runtime
from control.store.orm import ConfigRow, DeploymentRow, ServerRow, StackRow


async def refresh(rt: Runtime) -> None:
    """Read the fleet's counts and hand them to the metrics registry's fleet collector."""
    heard_since = time.time() - rt.settings.heartbeat_lease
    # Counted in the aggregate, not grouped by a CASE: PostgreSQL will not match a GROUP BY
    # expression holding a bound parameter to the same expression in the select list.
    alive = func.sum(case((ServerRow.last_seen >= heard_since, 1), else_=0))
    counts = FleetCounts()
    async with rt.sessions() as session:
        deployments = await session.execute(
            select(DeploymentRow.status, ConfigRow.group, func.count())
            .outerjoin(ConfigRow, ConfigRow.id == DeploymentRow.config_id)
            .group_by(DeploymentRow.status, ConfigRow.group)
        )
        for status, group, n in deployments:
            key = (status, group or "")
            counts.deployments[key] = counts.deployments.get(key, 0) + n
        servers = await session.execute(
            select(ServerRow.status, func.count(), alive).group_by(ServerRow.status)
        )
        counts.agents = dict.fromkeys(AGENT_STATES, 0)
        for status, n, heard in servers:
            if status == "ENROLLED":
                counts.agents["alive"] += heard or 0
                counts.agents["silent"] += n - (heard or 0)
            else:
                counts.agents["not_enrolled"] += n
        stacks = await session.execute(
            select(StackRow.action, StackRow.status, func.count())
            .where(StackRow.parent_id.is_(None))
            .group_by(StackRow.action, StackRow.status)
        )
        counts.stacks = {(action, status): n for action, status, n in stacks}
    rt.metrics.fleet.counts = counts
