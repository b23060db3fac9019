"""The outbox: each result's signal, kept in the ledger with the result, sent in order until acknowledged.

A signal is composed when its generation finishes and committed in the same ledger
transaction. A refusal that can never succeed (``FINAL_REFUSALS``) drops it with a note;
any other failure backs off. While the poll loop finds its source unreachable, signals wait
for it (one prober, R09); its first good poll sends every pending signal at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from agent import client, progress, sealed, wire
from agent.diskfull import DiskWatch
from agent.httpclient import Session
from agent.ledger import Ledger, Outgoing, encode_body
from agent.transports.switch import AgentTransport, backoff

log = logging.getLogger(__name__)
#: Statuses that will never succeed on retry: the signal is dropped and noted.
FINAL_REFUSALS = frozenset({400, 403, 404, 409, 410, 413})

#: Opens an item's sealed fields (or just the one named) with this server's key.
Opener = Callable[[wire.DeploymentItem, wire.ItemMeta | None, str | None], wire.DeploymentItem]


class Outbox:
    """The signals of one agent: composed, queued with their result, delivered."""

    def __init__(
        self,
        ledger: Ledger,
        transport: AgentTransport,
        disk: DiskWatch,
        backoff_max: float,
        open_item: Opener,
    ) -> None:
        self.ledger = ledger
        self.transport = transport
        self.disk = disk
        self.backoff_max = backoff_max
        self.open_item = open_item
        #: Set when a signal is queued, or the outbox should look again.
        self.wake = asyncio.Event()
        #: Set by the poll loop while its source is unreachable: signals wait for its next good poll.
        self.source_down = False
        self._flush_all = False

    def compose(
        self, item_id: str, item: wire.DeploymentItem | None, meta: wire.ItemMeta | None, signal: wire.Signal
    ) -> Outgoing | None:
        """The signal for *item* carrying *signal*; None when it names no signal URL or NO_SIGNAL."""
        if item is None:
            return None
        try:
            item = self.open_item(item, meta, "inputs.deploy_signal_id")
        except sealed.SealError as e:
            log.error("deployment %s: no signal can be sent: %s", item_id, e)
            return None
        url = item.input_value("deploy_signal_id")
        if not url and meta is not None and item.input_value("deploy_signal_transport") == "HEAT_SIGNAL":
            # Heat's agents log in to the Heat API; ours signals with its own credential.
            url = self.transport.own_signal_url(meta.deployment_id, meta.generation)
        if not isinstance(url, str) or not url or item.input_value("deploy_signal_transport") == "NO_SIGNAL":
            return None
        verb = str(item.input_value("deploy_signal_verb") or "POST").upper()
        body = signal.to_json()
        body[wire.EXTRA_KEY] = {"config_id": item_id, "nonce": os.urandom(16).hex()}
        for key in ("refused", "attempts"):  # the agent's own (allowlist.py, attempts.py), never a hook's
            if signal.extra.get(key):
                body[wire.EXTRA_KEY][key] = signal.extra[key]
        if meta is not None:
            body[wire.EXTRA_KEY]["generation"] = meta.generation
        return Outgoing(0, item_id, url, verb, encode_body(body), 0)

    def finish(
        self,
        item_id: str,
        item: wire.DeploymentItem | None,
        meta: wire.ItemMeta | None,
        signal: wire.Signal,
        note: str = "",
    ) -> None:
        """Mark the generation finished and queue its signal, in one ledger transaction."""
        out = self.compose(item_id, item, meta, signal)
        self.ledger.mark_finished(item_id, signal.status_code, out, note)
        if out is not None:
            self.wake.set()

    async def record(
        self, item: wire.DeploymentItem, meta: wire.ItemMeta | None, signal: wire.Signal, note: str = ""
    ) -> None:
        """``finish`` *item*; on a full disk the result waits in memory until it can be written."""
        await self.disk.retry(
            f"record the result of deployment {item.name} ({item.id})",
            lambda: self.finish(item.id, item, meta, signal, note),
        )

    def progress_for(
        self, http: Session, item: wire.DeploymentItem, meta: wire.ItemMeta | None
    ) -> contextlib.AbstractAsyncContextManager[progress.Progress | None]:
        """Progress reports for *item*, sent like its result; none for documents not ours (Heat's)."""
        if meta is None or self.compose(item.id, item, meta, wire.Signal()) is None:
            return contextlib.nullcontext()
        return progress.Progress(functools.partial(self._send_progress, http, item, meta))

    async def _send_progress(
        self,
        http: Session,
        item: wire.DeploymentItem,
        meta: wire.ItemMeta | None,
        payload: dict[str, Any],
    ) -> bool:
        """One progress report where *item*'s result goes; never queued, False when not taken."""
        out = self.compose(item.id, item, meta, wire.Signal())
        if out is None or not self.transport.carries_progress:
            return False
        body = progress.progress_body(out.body, payload)
        url = self.transport.route(out.url)  # through the relay, when enrolled through one
        status, _ = await client.send(http, out.verb, url, body, self.transport.auth_headers(url))
        return 200 <= status < 300

    def source_back(self) -> None:
        """The poll loop reached its source again: send every pending signal now."""
        if self.source_down:
            self.source_down, self._flush_all = False, True
            self.wake.set()

    async def flush(self, http: Session) -> None:
        """Try every due signal once, in order; none while the source is down, all once it is back."""
        if self.source_down:
            return  # the poll loop probes the source; its first good poll wakes us
        now = float("inf") if self._flush_all else time.time()
        self._flush_all = False
        for out in self.ledger.due(now):
            await self._deliver(http, out)

    async def _deliver(self, http: Session, out: Outgoing) -> None:
        status, reason = await self.transport.deliver(http, out)
        what = f"record the delivery of the signal for {out.item_id}"
        if 200 <= status < 300:
            await self.disk.retry(what, lambda: self.ledger.delivered(out, f"{status}"))
        elif status in FINAL_REFUSALS:
            log.error("signal for %s refused (%s): %s", out.item_id, status, reason)
            await self.disk.retry(what, lambda: self.ledger.delivered(out, f"refused {status}: {reason}"))
        else:
            delay = backoff(out.attempts + 1, self.backoff_max, self.transport.poll_interval())
            log.warning(
                "signal for %s not delivered (%s %s); retry in %.1f s", out.item_id, status, reason, delay
            )
            await self.disk.retry(
                f"note the next try of the signal for {out.item_id}",
                lambda: self.ledger.retry_later(out, delay, f"{status} {reason}"),
            )

    async def run(self, http: Session) -> None:
        """Deliver signals as they are queued and come due, until cancelled."""
        while True:
            self.wake.clear()
            await self.flush(http)
            due = None if self.source_down else self.ledger.next_due()
            timeout = None if due is None else max(0.05, due - time.time())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.wake.wait()
