"""Checks: is an applied generation still true on this server? Asked by the control plane, changing nothing.

The document asks with ``anneal.deployments[id].check``, a number that grows with every
request. After the new generations ran, the agent runs the hook of each item whose number is
above the last it answered in check mode (``ANNEAL_CHECK=1``, hooks/checkmode.py): puppet
``--noop``, ansible ``--check``, salt ``test=True``, a script config's ``options.check``
program. Only Anneal's built-in hooks are run so: a hook from the hook dirs (Heat's) does
not know the mode and would apply, so its answer is ``unknown``. A check is not a run: the
ledger's generation entries are untouched; the state keys ``checks_done`` (item -> number
answered) and ``checks_unsent`` (results not yet acknowledged) change. Results go with the
next heartbeat, sent at once (``checks``), until the control plane acknowledges them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent import allowlist, component, dispatch, output, sealed, wire
from agent.config import AgentConfig
from agent.keys import Unsealer
from agent.ledger import Ledger
from agent.wire_caps import CHECK_ENV, CHECK_STATES, MAX_CHECK_DIFF, MAX_CHECK_REASON, trim_stream
from hooks.script import hook as script

log = logging.getLogger(__name__)
DONE, UNSENT = "checks_done", "checks_unsent"
APPLIED = ("finished", "signalled")
#: Bytes of results one heartbeat carries (the control plane caps a heartbeat's body at 64 KiB).
BEAT_BYTES = 40 * 1024


class Checker:
    """Runs the checks a document asks for and keeps their results until they are acknowledged."""

    def __init__(
        self,
        ledger: Ledger,
        config: AgentConfig,
        state_dir: Path,
        unsealer: Unsealer,
        wake: Callable[[], None],
    ) -> None:
        self.ledger, self.config, self.state_dir, self.unsealer = ledger, config, state_dir, unsealer
        #: Called when a result waits to be sent: the heartbeat goes now, not at its next beat.
        self.wake = wake

    async def run_due(self, doc: wire.Document, stopping: Callable[[], bool]) -> None:
        """Answer every check *doc* asks for that this agent has not answered yet."""
        done = self._load(DONE)
        for item in wire.sorted_items(doc.deployments):
            meta = doc.meta.get(item.id)
            if stopping() or meta is None or meta.check <= int(done.get(item.id, 0)):
                continue
            result = {**await self._verdict(item, meta), "at": round(time.time(), 3)}
            log.info("deployment %s: check %d says %s", item.name, meta.check, result["state"])
            unsent = {k: v for k, v in self._load(UNSENT).items() if k in doc.meta}
            unsent[item.id] = {"item": item.id, "deployment_id": meta.deployment_id, **result}
            done = {k: v for k, v in done.items() if k in doc.meta} | {item.id: meta.check}
            self.ledger.set_state(UNSENT, json.dumps(unsent))  # before DONE: a crash repeats the check
            self.ledger.set_state(DONE, json.dumps(done))
            self.wake()

    def payload(self) -> dict[str, Any]:
        """What a heartbeat carries: ``checks``, when results wait to be sent."""
        unsent = self.unsent()
        return {"checks": unsent} if unsent else {}

    def unsent(self) -> list[dict[str, Any]]:
        """The results a heartbeat carries now: the oldest first, as many as fit in one beat."""
        out: list[dict[str, Any]] = []
        size = 0
        for result in sorted(self._load(UNSENT).values(), key=lambda r: float(r.get("at", 0))):
            size += len(json.dumps(result))
            if out and size > BEAT_BYTES:
                break
            out.append(result)
        return out

    def acknowledged(self, answer: Any) -> None:
        """Forget the results the heartbeat's answer lists (``checks``: ``item:check``); send the rest now."""
        acked = set(answer.get("checks") or []) if isinstance(answer, dict) else set()
        unsent = self._load(UNSENT)
        left = {k: v for k, v in unsent.items() if f"{k}:{v.get('check')}" not in acked}
        if len(left) == len(unsent):
            return  # nothing acknowledged (an older control plane): the next beat tries again
        self.ledger.set_state(UNSENT, json.dumps(left))
        if left:
            self.wake()

    def _load(self, key: str) -> dict[str, Any]:
        raw = self.ledger.get_state(key)
        value = json.loads(raw) if raw else {}
        return value if isinstance(value, dict) else {}

    async def _verdict(self, item: wire.DeploymentItem, meta: wire.ItemMeta) -> dict[str, Any]:
        base = {"generation": meta.generation, "check": meta.check}
        entry = self.ledger.entry(item.id)
        if entry is None or entry.state not in APPLIED:
            why = f"generation {meta.generation} is not applied here (ledger: {entry.state if entry else 'absent'})"
            return {**base, **_unknown(why)}
        try:
            signal = await self._check(item, meta)
        except sealed.SealError as e:
            signal = wire.Signal(stderr=f"cannot open a secret of this deployment: {e}")
        return {**base, **_result(signal)}

    async def _check(self, item: wire.DeploymentItem, meta: wire.ItemMeta) -> wire.Signal:
        """The hook's verdict, or why there is none; never a run that could change the server."""
        found = self._hook(item, meta)
        if isinstance(found, wire.Signal):
            return found
        chosen, argv = found
        probe_id = f"{item.id}.check"
        timeout = meta.timeout or self.config.hook_timeout
        env = dispatch.hook_env(self.config.hook_env, self.state_dir, probe_id, meta, timeout, 1)
        env[CHECK_ENV] = "1"
        try:
            if chosen.group != "script":
                return await dispatch.run_hook(argv, chosen, env=env, timeout=timeout)
            probe = script.check_item(chosen)  # the agent runs scripts itself: the hook's rule, here
            if probe is None:
                return _says(script.NO_CHECK)
            return script.check_verdict(await dispatch.run_hook(argv, probe, env=env, timeout=timeout))
        finally:
            output.discard_output(self.state_dir, probe_id)

    def _hook(
        self, item: wire.DeploymentItem, meta: wire.ItemMeta
    ) -> tuple[wire.DeploymentItem, list[str]] | wire.Signal:
        """What runs the check (the item opened, the hook's command), or an ``unknown`` saying why none can."""
        if sealed.unavailable(item, meta.sealed):
            return _says("sealed to a key this server no longer holds")
        chosen = component.pick(self.unsealer.open(item, meta))
        if chosen is None:
            return _says(f"component has no config for {item.input_value('deploy_action')}")
        if (refused := allowlist.refusal(self.config, chosen)) is not None:
            return _says(refused.stderr)
        argv = dispatch.hook_argv(chosen.group, self.config.hook_dirs)
        if (
            argv is None
            or chosen.group not in dispatch.BUILTIN_HOOKS
            or argv != dispatch.builtin_argv(chosen.group)
        ):
            hook = argv[0] if argv else f"no hook for group {chosen.group!r}"
            return _says(f"{hook}: not one of Anneal's built-in hooks, which alone have a check mode")
        return chosen, argv


def _says(reason: str) -> wire.Signal:
    return wire.Signal(extra={"check": "unknown", "reason": reason})


def _unknown(reason: str) -> dict[str, Any]:
    return {"state": "unknown", "diff": "", "reason": trim_stream(reason, MAX_CHECK_REASON)}


def _result(signal: wire.Signal) -> dict[str, Any]:
    """A hook's check result as the heartbeat carries it; anything but a verdict is ``unknown``."""
    state = signal.extra.get("check")
    if state not in CHECK_STATES:
        why = f"the hook gave no check verdict (status {signal.status_code}): {signal.stderr}"
        return _unknown(why)
    reason = str(signal.extra.get("reason") or "")
    return {
        "state": state,
        "diff": trim_stream(signal.stdout, MAX_CHECK_DIFF),
        "reason": trim_stream(reason, MAX_CHECK_REASON),
    }
