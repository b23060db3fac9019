"""One unit of work: a database transaction plus what to do once it commits."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from control.runtime import Runtime
from control.store.orm import EventRow, ServerRow


@dataclass
class Txn:
    session: AsyncSession
    runtime: Runtime
    publish: set[str] = field(default_factory=set)
    kicks: set[str] = field(default_factory=set)
    later: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def event(
        self,
        stack_id: str,
        resource_name: str,
        action: str,
        status: str,
        reason: str = "",
        *,
        traversal: int = 0,
        deployment_id: str | None = None,
    ) -> None:
        self.session.add(
            EventRow(
                stack_id=stack_id,
                resource_name=resource_name,
                deployment_id=deployment_id,
                traversal=traversal,
                action=action,
                status=status,
                reason=reason,
                timestamp=time.time(),
            )
        )

    async def commit(self, kick: Callable[[str], None] | None = None) -> None:
        """Commit, then publish documents, run deferred work and wake the engine."""
        if self.publish:
            # One serial bump per transaction: the document agents see changes exactly once.
            await self.session.execute(
                update(ServerRow)
                .where(ServerRow.id.in_(sorted(self.publish)))
                .values(serial=ServerRow.serial + 1, serial_at=time.time())
            )
        await self.session.commit()
        if self.publish:
            await self.runtime.publish(self.publish)
        for job in self.later:
            await job()
        if kick is not None:
            for stack_id in self.kicks:
                kick(stack_id)
