"""The agent: poll, run in name order, signal, heartbeat — as concurrent tasks.

Polling and heartbeats go on while a hook runs. Every generation is marked
started in the ledger before its hook runs and finished (with its signal
queued) after; the outbox delivers signals in order until acknowledged.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import random
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agent import (
    client,
    component,
    diskfull,
    dispatch,
    envelope,
    keys,
    orders,
    progress,
    recovery,
    sealed,
    transports,
    verify,
    wire,
)
from agent.config import AgentConfig
from agent.errors import DocumentRejectedError, SourceNotAvailableError
from agent.ledger import Ledger, Outgoing, encode_body
from agent.transports import AgentTransport

log = logging.getLogger(__name__)
VERSION = "0.1.0"
#: Statuses that will never succeed on retry: the signal is dropped and noted.
FINAL_REFUSALS = frozenset({400, 403, 404, 409, 410, 413})
#: Seconds, at most, an agent waits before its first poll.
START_JITTER = 0.5


class Agent:
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
        self._outbox = asyncio.Event()
        #: While the poll loop finds its source unreachable, signals wait for it (one prober, R09);
        #: its first good poll sends every pending signal at once.
        self._source_down = False
        self._flush_all = False
        self._report = asyncio.Event()
        #: A full state dir is waited out, shown and reported (agent/diskfull.py).
        self.disk = diskfull.DiskWatch(state_dir, on_change=self._report.set)
        self.ledger.on_commit = self.disk.wrote
        self._box_key: X25519PrivateKey | None = None
        self.running: str | None = None
        #: Set on the first SIGTERM: start nothing new, let the running hook finish.
        self.stopping = False

    # -------------------------------------------------------------- entry points

    async def run(self) -> None:
        """Run until cancelled; a full state dir is waited out, never a reason to exit."""
        self.disk.open()
        await self.disk.retry("settle the deployments a crash interrupted", self.recover)
        async with aiohttp.ClientSession() as http:
            self._http = http
            self._work.set()
            self._outbox.set()
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.disk.keep_running(self._poll_loop, "accepting a document", self._wake))
                tg.create_task(self.disk.keep_running(self._work_loop, "running deployments", self._wake))
                tg.create_task(self.disk.keep_running(self._outbox_loop, "sending signals", self._wake))
                tg.create_task(self._heartbeat_loop())

    def _wake(self) -> None:
        self._work.set()
        self._outbox.set()

    async def once(self) -> int:
        """One pass: fetch, run what is new, try to deliver every queued signal.

        A full state dir ends it with DiskFullError (reported first when possible): nothing waits.
        """
        self.disk.wait = False
        async with aiohttp.ClientSession() as http:
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
        await self.flush()
        return failures

    # -------------------------------------------------------------- recovery

    def recover(self) -> None:
        """A generation started but never finished was interrupted: re-run only if its config allows."""
        recovery.recover(self)

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
        body = fetched.body
        items = [_ledger_item(d, doc) for d in doc.deployments]
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
                if self._source_down:
                    self._source_down, self._flush_all = False, True
                    self._outbox.set()
            except (SourceNotAvailableError, DocumentRejectedError) as e:
                failures += 1
                self._source_down = isinstance(e, SourceNotAvailableError)
                # Counted from the request's start: a request that hung until its timeout is
                # part of the wait, so an agent at the cap starts one request per cap (R09).
                delay = transports.backoff(failures, self.config.backoff_max, self.poll_interval())
                log.warning("poll failed (%s); retrying in %.1f s", e, delay)
                await asyncio.sleep(max(0.0, started + delay - time.monotonic()))

    def poll_interval(self) -> float:
        """Seconds between ordinary polls of the current source (0: HTTP long-polls back to back)."""
        if self.transport.kind == "HTTP":
            return 0.0
        return float(self.transport.section.get("poll_interval") or 5.0)

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
        raw = self.ledger.get_state("document")
        return wire.decode_document(raw.encode()) if raw else None

    def _lookup(self, item_id: str) -> tuple[wire.DeploymentItem | None, wire.ItemMeta | None]:
        doc = self.document()
        if doc is None:
            return None, None
        return next((d for d in doc.deployments if d.id == item_id), None), doc.meta.get(item_id)

    def _open(
        self, item: wire.DeploymentItem, meta: wire.ItemMeta | None, only: str | None = None
    ) -> wire.DeploymentItem:
        """*item* with its sealed fields (or just *only*) opened with this server's key; never logged."""
        fields = [f for f in (meta.sealed if meta else ()) if only is None or f == only]
        if not fields:
            return item
        if self._box_key is None:
            try:
                self._box_key = keys.load_box_key(self.state_dir)
            except (OSError, ValueError) as e:
                raise sealed.SealError(f"this server's box key cannot be read: {e}") from e
        return sealed.open_item(item, fields, self.config.server_id, self._box_key)

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
        return failures

    async def _work_loop(self) -> None:
        while True:
            await self._work.wait()
            self._work.clear()
            await self.work()

    async def _run(self, item: wire.DeploymentItem, meta: wire.ItemMeta | None) -> wire.Signal:
        try:
            # Secrets are opened only here, to go into the hook's stdin (and its environment, by the hook).
            opened = self._open(item, meta)
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
        return await self._run_hook(item, chosen, meta)

    async def _settle(
        self, item: wire.DeploymentItem, meta: wire.ItemMeta | None, signal: wire.Signal, note: str = ""
    ) -> None:
        """Record *item* started and finished with *signal*, without running a hook."""
        await self.disk.retry(
            f"mark deployment {item.name} started", lambda: self.ledger.mark_started(item.id)
        )
        await self._record(item, meta, signal, note)

    async def _record(
        self, item: wire.DeploymentItem, meta: wire.ItemMeta | None, signal: wire.Signal, note: str = ""
    ) -> None:
        """Record the result and queue its signal; on a full disk it waits in memory until it can."""
        await self.disk.retry(
            f"record the result of deployment {item.name} ({item.id})",
            lambda: self._finish(item.id, item, meta, signal, note),
        )

    async def _run_hook(
        self, item: wire.DeploymentItem, chosen: wire.DeploymentItem, meta: wire.ItemMeta | None
    ) -> wire.Signal:
        """Run *chosen* (the item, or a component's entry for the action) and record it as *item*."""
        await self.disk.room_for(f"start deployment {item.name} ({item.id})")
        run = recovery.attempts(self, item.id) + 1

        def mark_started() -> None:
            self.ledger.set_state(f"runs:{item.id}", str(run))
            self.ledger.mark_started(item.id)

        await self.disk.retry(f"mark deployment {item.name} started", mark_started)
        self.running = item.id
        timeout = meta.timeout if meta and meta.timeout else self.config.hook_timeout
        argv = dispatch.hook_argv(chosen.group, self.config.hook_dirs)
        log.info("running deployment %s (%s) with hook %s", item.name, item.id, chosen.group)
        env = self._hook_env(meta, timeout)
        env.update(ANNEAL_IDEMPOTENCY_KEY=item.id, ANNEAL_RUN_ATTEMPT=str(run))
        env["ANNEAL_HOOK_STDOUT_COPY"] = str(recovery.stdout_copy_path(self.state_dir, item.id))

        def started(pid: int) -> None:  # the hook runs already: a full disk must not leave it behind
            identity = recovery.hook_identity(pid)
            self.disk.unless_full(
                f"keep hook pid {pid}", lambda: self.ledger.set_state(f"hookpid:{item.id}", identity)
            )

        try:
            if argv is None:
                signal = dispatch.missing_hook(chosen.group, self.config.hook_dirs)
            else:
                async with self._progress(item, meta) as reporter:
                    self._doc_changed.clear()
                    signal = await orders.run_unless_stopped(
                        dispatch.run_hook(
                            argv,
                            chosen,
                            env=env,
                            timeout=timeout,
                            tee=recovery.output_paths(self.state_dir, item.id),
                            on_start=started,
                            on_stderr=reporter.feed if reporter else None,
                        ),
                        item.id,
                        self._doc_changed,
                        self.document,
                    )
        finally:
            self.running = None
        await self._record(item, meta, signal)
        recovery.discard_output(self.state_dir, item.id)
        log.info("deployment %s finished with status code %s", item.name, signal.status_code)
        return signal

    def _progress(
        self, item: wire.DeploymentItem, meta: wire.ItemMeta | None
    ) -> contextlib.AbstractAsyncContextManager[progress.Progress | None]:
        """Progress reports for *item*, sent like its result; none for documents not ours (Heat's)."""
        if meta is None or self._outgoing(item.id, item, meta, wire.Signal()) is None:
            return contextlib.nullcontext()

        async def send(payload: dict[str, Any]) -> bool:
            out = self._outgoing(item.id, item, meta, wire.Signal())
            if out is None or not self.transport.carries_progress:
                return False
            body = progress.progress_body(out.body, payload)
            url = self.transport.route(out.url)  # through the relay, when enrolled through one
            status, _ = await client.send(self._http, out.verb, url, body, self._signal_headers(out))
            return 200 <= status < 300

        return progress.Progress(send)

    def _hook_env(self, meta: wire.ItemMeta | None, timeout: float) -> dict[str, str]:
        env = {**os.environ, **self.config.hook_env}
        env["ANNEAL_HOOK_WORKDIR"] = str(self.state_dir / "hooks")
        env["ANNEAL_HOOK_TIMEOUT"] = f"{timeout:g}"
        if meta is not None:
            env["DEPLOY_IDEMPOTENCY_KEY"] = meta.hash
        return env

    def _finish(
        self,
        item_id: str,
        item: wire.DeploymentItem | None,
        meta: wire.ItemMeta | None,
        signal: wire.Signal,
        note: str = "",
    ) -> None:
        out = self._outgoing(item_id, item, meta, signal)
        self.ledger.mark_finished(item_id, signal.status_code, out, note)
        if out is not None:
            self._outbox.set()

    def _outgoing(
        self, item_id: str, item: wire.DeploymentItem | None, meta: wire.ItemMeta | None, signal: wire.Signal
    ) -> Outgoing | None:
        if item is None:
            return None
        try:
            item = self._open(item, meta, only="inputs.deploy_signal_id")
        except sealed.SealError as e:
            log.error("deployment %s: no signal can be sent: %s", item_id, e)
            return None
        url = item.input_value("deploy_signal_id")
        if not isinstance(url, str) or not url or item.input_value("deploy_signal_transport") == "NO_SIGNAL":
            return None
        verb = str(item.input_value("deploy_signal_verb") or "POST").upper()
        body = signal.to_json()
        body[wire.EXTRA_KEY] = {"config_id": item_id, "nonce": secrets.token_hex(16)}
        if meta is not None:
            body[wire.EXTRA_KEY]["generation"] = meta.generation
        return Outgoing(0, item_id, url, verb, encode_body(body), 0)

    # -------------------------------------------------------------- signalling

    async def flush(self) -> None:
        """Try every due signal once, in order; none while the source is down, all once it is back."""
        if self._source_down:
            return  # the poll loop probes the source; its first good poll wakes us
        now = float("inf") if self._flush_all else time.time()
        self._flush_all = False
        for out in self.ledger.due(now):
            await self._deliver(out)

    def _signal_headers(self, out: Outgoing) -> dict[str, str]:
        return self.transport.auth_headers(self.transport.route(out.url))  # never to a third party

    async def _deliver(self, out: Outgoing) -> None:
        status, reason = await self.transport.deliver(self._http, out)
        what = f"record the delivery of the signal for {out.item_id}"
        if 200 <= status < 300:
            await self.disk.retry(what, lambda: self.ledger.delivered(out, f"{status}"))
        elif status in FINAL_REFUSALS:
            log.error("signal for %s refused (%s): %s", out.item_id, status, reason)
            await self.disk.retry(what, lambda: self.ledger.delivered(out, f"refused {status}: {reason}"))
        else:
            delay = transports.backoff(out.attempts + 1, self.config.backoff_max, self.poll_interval())
            log.warning(
                "signal for %s not delivered (%s %s); retry in %.1f s", out.item_id, status, reason, delay
            )
            await self.disk.retry(
                f"note the next try of the signal for {out.item_id}",
                lambda: self.ledger.retry_later(out, delay, f"{status} {reason}"),
            )

    async def _outbox_loop(self) -> None:
        while True:
            self._outbox.clear()
            await self.flush()
            due = None if self._source_down else self.ledger.next_due()
            timeout = None if due is None else max(0.05, due - time.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._outbox.wait(), timeout)

    async def _heartbeat_loop(self) -> None:
        if not self.config.heartbeat_url:
            return  # enrolled offline (agent/transports/offline.py): no route to the control plane at all
        while True:
            url = self.transport.route(self.config.heartbeat_url)  # follows a move to or from a relay
            payload = self._beat_payload()
            payload["ledger"] = orders.ledger_report(self.ledger, self.document())
            payload["transport"] = self.transport.kind
            self._report.clear()
            await client.heartbeat(self._http, url, self.config.credential, payload)
            # A rejected document is reported at once, not at the next beat.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._report.wait(), self.config.heartbeat_interval * random.uniform(0.9, 1.1)
                )

    def _beat_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"version": VERSION, "running": self.running, **self.ledger.summary()}
        if self.disk.condition is not None:
            payload["disk_full"] = self.disk.condition
        return payload

    async def _beat(self) -> None:
        """One heartbeat now (best effort), for the one-pass command."""
        if self.config.heartbeat_url:
            url = self.transport.route(self.config.heartbeat_url)
            await client.heartbeat(self._http, url, self.config.credential, self._beat_payload())

    async def drain(self, grace: float) -> None:
        """Stop starting work; wait up to *grace* seconds for the running hook and its signal."""
        self.stopping = True
        deadline = time.monotonic() + grace
        while self.running is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        while self.ledger.pending_count() and time.monotonic() < deadline:
            self._outbox.set()
            await asyncio.sleep(0.1)

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


def _ledger_item(item: wire.DeploymentItem, doc: wire.Document) -> dict[str, Any]:
    meta = doc.meta.get(item.id)
    return {
        "item_id": item.id,
        "deployment_id": meta.deployment_id if meta else "",
        "generation": meta.generation if meta else 0,
        "name": item.name,
        "hash": meta.hash if meta else "",
        "action": meta.action if meta else str(item.input_value("deploy_action") or ""),
    }


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str)
