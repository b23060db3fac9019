"""The agent: poll, run in name order, signal, heartbeat — as concurrent tasks.

Polling and heartbeats go on while a hook runs. Every generation is marked started in the
ledger before its hook runs and finished (with its signal queued) after; the outbox
(``agent.outbox``) delivers signals in order until acknowledged; ``agent.checks`` the checks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from agent import (
    addresses,
    allowlist,
    attempts,
    client,
    component,
    diskfull,
    dispatch,
    envelope,
    handover,
    keys,
    orders,
    output,
    recovery,
    sealed,
    verify,
    wire,
)
from agent.config import AgentConfig, identity
from agent.errors import DocumentRejectedError, SourceNotAvailableError
from agent.httpclient import Session
from agent.ledger import Ledger, ledger_items
from agent.outbox import Outbox
from agent.transports.switch import AgentTransport, backoff

log = logging.getLogger(__name__)
#: Seconds, at most, an agent waits before its first poll.
START_JITTER = 0.5


class Agent:
    """One server's agent: polls its document, runs what is new in name order, reports."""

    #: What composes and delivers this agent's signals (Heat's agent signals in Heat's form).
    outbox_class: ClassVar[type[Outbox]] = Outbox

    def __init__(self, config: AgentConfig, state_dir: Path) -> None:
        self.config = config
        self.state_dir = state_dir
        self.ledger = Ledger(state_dir)
        #: The agent's notion of now (expiry checks); tests move it instead of sleeping.
        self.clock: Callable[[], float] = time.time
        self.verifiers, self.serial_check, self.signature_check = verify.policy(
            config.document_policy,
            config.server_id,
            self.ledger.get_state("trusted_key") or config.control_public_key,
            int(self.ledger.get_state("serial", "0") or 0),
            lambda: self.clock(),  # noqa: PLW0108 (late binding: tests replace self.clock)
        )
        self.transport = AgentTransport(config, self.ledger)
        self._work = asyncio.Event()
        #: Set whenever a new document is accepted: a running hook checks for a stop order.
        self._doc_changed = asyncio.Event()
        self._report = asyncio.Event()
        #: A full state dir is waited out, shown and reported (agent/diskfull.py).
        self.disk = diskfull.DiskWatch(state_dir, on_change=self._report.set)
        self.ledger.on_commit = self.disk.wrote
        self.unsealer = keys.Unsealer(state_dir, config.server_id)
        self.outbox = self.outbox_class(
            self.ledger, self.transport, self.disk, config.backoff_max, self.unsealer.open
        )
        self.heartbeat = client.Heartbeat(config.credential)
        self.checker = orders.Checker(self.ledger, config, state_dir, self.unsealer, self._report.set)
        self.addresses = addresses.Addresses()
        self.running: str | None = None
        #: Set on the first SIGTERM: start nothing new, let the running hook finish.
        self.stopping = False

    # -------------------------------------------------------------- entry points

    async def run(self) -> None:
        """Run until cancelled; a full state dir is waited out, never a reason to exit."""
        self.disk.open()
        await self.disk.retry("settle the deployments a crash interrupted", self.recover)
        async with Session() as http:
            self._http = http
            self._wake()
            send = functools.partial(self.outbox.run, http)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.disk.keep_running(self._poll_loop, "accepting a document", self._wake))
                tg.create_task(self.disk.keep_running(self._work_loop, "running deployments", self._wake))
                tg.create_task(self.disk.keep_running(send, "sending signals", self._wake))
                tg.create_task(self._heartbeat_loop())

    def _wake(self) -> None:
        self._work.set()
        self.outbox.wake.set()

    async def once(self) -> int:
        """One pass: fetch, run what is new, try to deliver every queued signal.

        A full state dir ends it with DiskFullError (reported first when possible): nothing waits.
        """
        self.disk.wait = False
        async with Session() as http:
            self._http = http
            try:
                failures = await self._one_pass()
            except Exception as e:
                if (full := self.disk.give_up(e)) is None:
                    raise
                await self._beat()
                if full is e:
                    raise
                raise full from e
            if self._report.is_set():
                await self._beat()
        return 1 if failures else 0

    async def _one_pass(self) -> int:
        await self.disk.retry("settle the deployments a crash interrupted", self.recover)
        try:
            await self.poll(wait=0)
        except SourceNotAvailableError as e:
            log.error("%s", e)
        except DocumentRejectedError:
            pass  # noted and logged by poll
        failures = await self.work()
        await self.outbox.flush(self._http)
        return failures

    # -------------------------------------------------------------- recovery

    def recover(self) -> None:
        """A generation started but never finished was interrupted: re-run only if its config allows."""
        for decision in recovery.recover(self.ledger, self.state_dir, self._lookup):
            if isinstance(decision, recovery.Rerun):
                self.ledger.mark_received(decision.item_id, decision.note)
                continue
            self.outbox.finish(decision.item_id, decision.item, decision.meta, decision.signal, decision.note)
            output.discard_output(self.state_dir, decision.item_id)

    # -------------------------------------------------------------- polling

    async def poll(self, wait: float) -> bool:
        """Fetch the document; True when a new one was accepted."""
        fetched = await self.transport.fetch(self._http, self.ledger.get_state("etag", "") or "", wait)
        if fetched.body is None:
            self.check_frozen()
            return False
        try:
            doc = verify.decode_and_verify(fetched.body, self.verifiers)
        except DocumentRejectedError as e:
            self.note_rejection(e.kind, str(e))
            raise
        body, items = fetched.body, ledger_items(doc)
        # A new transport has its own ETags: its first poll fetches the document afresh.
        state = {"etag": "" if self.transport.accept(doc.transport) else fetched.etag}
        if self.signature_check is not None and self.signature_check.signer != self.signature_check.trusted:
            # Adopted through the chain: from now on only the new key (and its successors) counts.
            state["trusted_key"] = base64.b64encode(self.signature_check.signer).decode()
            self.signature_check.trusted = self.signature_check.signer
        await self.disk.retry(
            f"keep document serial {doc.serial}",
            lambda: self.ledger.accept_document(doc.serial, body, items, state),
        )
        self.serial_check.highest = doc.serial
        handover.follow(self, doc.handover)  # a move to another control plane, signed by this one
        log.info("accepted document serial %s with %d deployments", doc.serial, len(items))
        self._work.set()
        self._doc_changed.set()
        return True

    async def _poll_loop(self) -> None:
        # A fleet restarted together (a control-plane return, a mass reboot) spreads its first polls.
        await asyncio.sleep(random.uniform(0, START_JITTER))
        failures = 0
        while True:
            started = time.monotonic()
            try:
                await self.poll(self.config.poll_wait)
                failures = 0
                self.outbox.source_back()
            except (SourceNotAvailableError, DocumentRejectedError) as e:
                failures += 1
                self.outbox.source_down = isinstance(e, SourceNotAvailableError)
                # Counted from the request's start: a request that hung until its timeout is
                # part of the wait, so an agent at the cap starts one request per cap (R09).
                delay = backoff(failures, self.config.backoff_max, self.transport.poll_interval())
                log.warning("poll failed (%s); retrying in %.1f s", e, delay)
                await asyncio.sleep(max(0.0, started + delay - time.monotonic()))

    def note_rejection(self, kind: str, reason: str) -> None:
        """Keep the rejection in the ledger (for `status`) and report it with the next heartbeat, now."""
        log.error("%s", reason)
        self.ledger.note_rejection(kind, reason, time.time())
        self._report.set()

    def check_frozen(self) -> bool:
        """True when the document held is past its expiry: nothing from it runs any more."""
        doc = self.document()
        if doc is None or not verify.expired(doc, self.clock()):
            return False
        if self.ledger.get_state("frozen_serial") != str(doc.serial):
            self.ledger.set_state("frozen_serial", str(doc.serial))
            self.note_rejection(
                "expired",
                f"document serial {doc.serial} expired at {doc.expires_at} and no newer one arrived (frozen)",
            )
        return True

    # -------------------------------------------------------------- running

    def document(self) -> wire.Document | None:
        return wire.decode_document(raw.encode()) if (raw := self.ledger.get_state("document")) else None

    def _lookup(self, item_id: str) -> tuple[wire.DeploymentItem | None, wire.ItemMeta | None]:
        doc = self.document()
        if doc is None:
            return None, None
        return next((d for d in doc.deployments if d.id == item_id), None), doc.meta.get(item_id)

    async def work(self) -> int:
        """Run every generation of the document not yet in the ledger, in name order."""
        doc = self.document()
        failures = 0
        if doc is None or self.check_frozen():
            return 0
        for item in wire.sorted_items(doc.deployments):
            if self.stopping:
                break
            entry = self.ledger.entry(item.id)
            if entry is not None and entry.state != "received":
                continue
            if orders.stop_requested(self.document(), item.id):
                stopped = wire.Signal(orders.STOPPED_CODE, stderr=orders.STOPPED)
                await self._settle(item, doc.meta.get(item.id), stopped, note="stopped")
                continue
            signal = await self._run(item, doc.meta.get(item.id))
            failures += signal.status_code != 0
        await self.checker.run_due(self.document() or doc, lambda: self.stopping)  # agent/checks.py
        return failures

    async def _work_loop(self) -> None:
        while True:
            await self._work.wait()
            self._work.clear()
            await self.work()

    async def _run(self, item: wire.DeploymentItem, meta: wire.ItemMeta | None) -> wire.Signal:
        if sealed.unavailable(item, meta.sealed if meta else ()):
            # Rendered before this server enrolled: enrolment renders the document anew, sealed to
            # this server's key, and the item runs from that one (it stays unrun until then).
            log.info(
                "deployment %s: sealed before this server enrolled; waiting for the next document", item.name
            )
            return wire.Signal()
        try:
            # Secrets are opened only here, to go into the hook's stdin (and its environment, by the hook).
            opened = self.unsealer.open(item, meta)
        except sealed.SealError as e:
            signal = wire.Signal(status_code=1, stderr=f"cannot open a secret of this deployment: {e}")
            await self._settle(item, meta, signal)
            return signal
        chosen = component.pick(opened)
        if chosen is None:
            note = f"component has no config for {item.input_value('deploy_action')}; nothing run"
            log.warning("deployment %s: %s", item.name, note)
            await self._settle(item, None, wire.Signal(status_code=0), note=note)
            return wire.Signal(status_code=0)
        if (refused := allowlist.refusal(self.config, chosen)) is not None:
            log.warning("deployment %s: %s", item.name, refused.stderr)
            await self._settle(item, meta, refused, note="refused by the node allowlist")
            return refused
        return await self._run_hook(item, chosen, meta)

    async def _settle(
        self, item: wire.DeploymentItem, meta: wire.ItemMeta | None, signal: wire.Signal, note: str = ""
    ) -> None:
        """Record *item* started and finished with *signal*, without running a hook."""
        await self.disk.retry(
            f"mark deployment {item.name} started", lambda: self.ledger.mark_started(item.id)
        )
        await self.outbox.record(item, meta, signal, note)

    async def _run_hook(
        self, item: wire.DeploymentItem, chosen: wire.DeploymentItem, meta: wire.ItemMeta | None
    ) -> wire.Signal:
        """Run *chosen* (the item, or a component's entry for the action) and record it as *item*."""
        await self.disk.room_for(f"start deployment {item.name} ({item.id})")
        run = recovery.attempts(self.ledger, item.id) + 1

        def mark_started() -> None:
            self.ledger.set_state(f"runs:{item.id}", str(run))
            self.ledger.mark_started(item.id)

        await self.disk.retry(f"mark deployment {item.name} started", mark_started)
        self.running = item.id
        log.info("running deployment %s (%s) with hook %s", item.name, item.id, chosen.group)
        try:
            signal = await self._call_hook(item, chosen, meta, run)
        finally:
            self.running = None
        await self.outbox.record(item, meta, signal)
        output.discard_output(self.state_dir, item.id)
        log.info("deployment %s finished with status code %s", item.name, signal.status_code)
        return signal

    async def _call_hook(
        self, item: wire.DeploymentItem, chosen: wire.DeploymentItem, meta: wire.ItemMeta | None, run: int
    ) -> wire.Signal:
        """The hook's result (its attempts, agent/attempts.py), or why there is none; a stop order ends it early."""
        argv = dispatch.hook_argv(chosen.group, self.config.hook_dirs)
        if argv is None:
            return dispatch.missing_hook(chosen.group, self.config.hook_dirs)
        budget = meta.timeout if meta and meta.timeout else self.config.hook_timeout

        def started(pid: int) -> None:  # the hook runs already: a full disk must not leave it behind
            identity = output.hook_identity(pid)
            self.disk.unless_full(
                f"keep hook pid {pid}", lambda: self.ledger.set_state(f"hookpid:{item.id}", identity)
            )

        async with self.outbox.progress_for(self._http, item, meta) as reporter:
            feed = reporter.feed if reporter else (lambda chunk: None)
            note = reporter.note if reporter else (lambda retry: None)

            async def attempt(number: int, limit: float) -> wire.Signal:
                if number != run:  # recovery counts the runs of a generation
                    await self.disk.retry(
                        "count the attempt", lambda: self.ledger.set_state(f"runs:{item.id}", str(number))
                    )
                env = dispatch.hook_env(self.config.hook_env, self.state_dir, item.id, meta, limit, number)
                tee = output.output_paths(self.state_dir, item.id)
                return await dispatch.run_hook(
                    argv, chosen, env=env, timeout=limit, tee=tee, on_start=started, on_stderr=feed
                )

            self._doc_changed.clear()
            policy = attempts.Policy.of(meta.retry if meta else None)
            return await orders.run_unless_stopped(
                attempts.run(policy, run, budget, attempt, feed, note),
                item.id,
                self._doc_changed,
                self.document,
                self.state_dir,
            )

    async def _heartbeat_loop(self) -> None:
        if not self.config.heartbeat_url:
            return  # enrolled offline (agent/transports/offline.py): no route to the control plane at all
        while True:
            forced = self._report.is_set()
            self._report.clear()
            await self._beat(report=True, forced=forced)
            # A rejected document is reported at once, not at the next beat.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.heartbeat_interval * random.uniform(0.9, 1.1)):
                    await self._report.wait()

    async def _beat(self, report: bool = False, forced: bool = True) -> None:
        """One heartbeat, best effort; the loop's (*report*) carry the ledger report and transport.
        Unless *forced*, one saying nothing new is left out while polls show it alive (client.Heartbeat)."""
        if not self.config.heartbeat_url:
            return
        url = self.transport.route(self.config.heartbeat_url)  # follows a move to or from a relay
        payload: dict[str, Any] = {**identity(), "running": self.running, **self.ledger.summary()}
        if self.disk.condition is not None:
            payload["disk_full"] = self.disk.condition
        if report:
            payload["ledger"] = orders.ledger_report(self.ledger, self.document())
            payload["transport"] = self.transport.kind
        payload.update(await self.addresses.fields(fresh=report), **self.checker.payload())
        if self.heartbeat.due(payload, polls_say_alive=self.transport.kind == "HTTP", forced=forced):
            self.checker.acknowledged(await self.heartbeat.send(self._http, url, payload))

    def status(self) -> dict[str, Any]:
        doc = self.document()
        check = self.signature_check
        return {
            "server_id": self.config.server_id,
            "document_policy": self.config.document_policy,
            "trusted_key_id": envelope.key_id(check.trusted) if check else None,
            "document_expires_at": doc.expires_at if doc else None,
            "frozen": bool(doc and verify.expired(doc, self.clock())),
            **self.ledger.summary(),
            "disk_full": self.disk.condition or diskfull.read_condition(self.state_dir),
            "entries": [e.__dict__ for e in self.ledger.entries()],
        }
