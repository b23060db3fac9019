"""Wait conditions: a handle that takes signals, and a condition that waits for enough of them.

``OS::Heat::WaitConditionHandle`` / ``AWS::CloudFormation::WaitConditionHandle`` keep the
signals they receive under ``attributes[SIGNALS]`` (id -> status, reason, data), as Heat
keeps them in the handle's metadata. Its URL (``/v1/heat/waitcondition/<handle id>``)
opens with the handle's token (``X-Auth-Token``) or the URL's own ``sig``, both HMACs over
the handle's id: scoped to that handle, dead with it (its row is gone).

``OS::Heat::WaitCondition`` / ``AWS::CloudFormation::WaitCondition`` are IN_PROGRESS until
``count`` SUCCESS signals are in, FAILED on the first FAILURE or after ``timeout`` seconds;
the engine asks ``check`` on every step while they wait (a signal wakes the stack).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select

from control.documents import heatauth
from control.errors import BadRequestError
from control.resources.base import REPLACE, Outcome, Res, done, warn
from control.store.orm import ResourceRow
from control.txn import Txn

SIGNALS = "anneal:signals"
WAIT = "anneal:wait"
TRANSPORT = "anneal:transport"
#: What ``get_resource`` gives instead of the physical id (an AWS handle: its pre-signed URL).
REF = "anneal:ref"
OS_HANDLE, AWS_HANDLE = "OS::Heat::WaitConditionHandle", "AWS::CloudFormation::WaitConditionHandle"
HANDLE_TYPES = (OS_HANDLE, AWS_HANDLE)
#: Signal transports a handle serves with another one here, and what the event says.
_HANDLE_NOTES = {
    "TEMP_URL_SIGNAL": "no Swift object is made: alarm_url is this handle's own URL, which takes PUT",
    "ZAQAR_SIGNAL": "this control plane has no Zaqar: the credentials signal the handle as HEAT_SIGNAL's do",
    "NO_SIGNAL": "the wait condition counts this handle as signalled at once, as Heat's does on its first check",
}


def handle_url(txn: Txn, handle_id: str) -> str:
    return f"{txn.runtime.settings.base_url}/v1/heat/waitcondition/{handle_id}"


class WaitConditionHandle:
    """Both handles: a URL scoped to one handle, and the signals it has received."""

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        handle_id = str(uuid.uuid4())
        transport = str(props.get("signal_transport") or "TOKEN_SIGNAL")
        if transport in _HANDLE_NOTES and res.type == OS_HANDLE:
            warn(txn, res, f"signal_transport {transport}: {_HANDLE_NOTES[transport]}")
        return done(handle_id, **self.attributes(txn, res, handle_id, transport), **{SIGNALS: {}})

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        if await self.replacement(txn, res, row, props) is not None:
            return REPLACE
        return done(row.physical_id, **row.attributes)

    async def replacement(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> str | None:
        old = (row.properties or {}).get("signal_transport")
        new = props.get("signal_transport")
        return f"signal_transport {old} -> {new}" if old != new else None

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return done()  # the row goes, and the URL with it

    def attributes(self, txn: Txn, res: Res, handle_id: str, transport: str) -> dict[str, Any]:
        url, keys = handle_url(txn, handle_id), txn.runtime.keys
        signed = f"{url}?sig={keys.capability('wait-handle', handle_id)}"
        if res.type == AWS_HANDLE:
            return {REF: signed}
        token = keys.capability("wait-handle", handle_id)
        attrs: dict[str, Any] = {"token": None, "endpoint": None, "curl_cli": None, TRANSPORT: transport}
        signal: dict[str, Any] | None = None
        if transport == "TOKEN_SIGNAL":
            attrs.update(
                token=token,
                endpoint=url,
                curl_cli=(
                    f"curl -i -X POST -H 'X-Auth-Token: {token}' -H 'Content-Type: application/json' "
                    f"-H 'Accept: application/json' {url}"
                ),
            )
        elif transport in ("CFN_SIGNAL", "TEMP_URL_SIGNAL"):
            signal = {"alarm_url": signed}
        elif transport in ("HEAT_SIGNAL", "ZAQAR_SIGNAL"):
            user = heatauth.user_id("handle", handle_id)
            base = txn.runtime.settings.base_url
            signal = {
                "auth_url": heatauth.auth_url(base),
                "username": user,
                "user_id": user,
                "password": heatauth.password(keys, user),
                "project_id": res.stack.id,
                "domain_id": heatauth.DOMAIN["id"],
                "region_name": heatauth.REGION,
                "alarm_url": f"{heatauth.orchestration_url(base, res.stack.id)}/stacks/"
                f"{res.stack_path}/resources/{res.name}/signal",
            }
        elif transport == "NO_SIGNAL":
            signal = {}
        attrs["signal"] = json.dumps(signal)
        return attrs


class WaitCondition:
    """Both wait conditions: done after ``count`` SUCCESS signals, failed on FAILURE or timeout."""

    def __init__(self, aws: bool = False) -> None:
        self.keys = ("Handle", "Timeout", "Count", "Data") if aws else ("handle", "timeout", "count", "data")

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        return await self._start(txn, res, props, str(uuid.uuid4()))

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        return await self._start(txn, res, props, row.physical_id or str(uuid.uuid4()))  # Heat waits anew

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        handle = await self._handle(txn, res, str((row.attributes.get(WAIT) or {}).get("handle") or ""))
        if handle is not None:  # as Heat: the handle forgets its signals
            handle.attributes = {**handle.attributes, SIGNALS: {}}
        return done()

    async def _start(self, txn: Txn, res: Res, props: Mapping[str, Any], physical_id: str) -> Outcome:
        handle_key, timeout_key, count_key, _ = self.keys
        where = f"{res.where}.properties"
        try:
            timeout, count = float(props.get(timeout_key) or 0), int(props.get(count_key) or 1)
        except (TypeError, ValueError):
            raise BadRequestError(f"{timeout_key} and {count_key} must be numbers", where=where) from None
        if not 1 <= timeout <= 43200 or count < 1:
            raise BadRequestError(
                f"{timeout_key} must be in 1..43200 s and {count_key} at least 1", where=where
            )
        handle_id = handle_of(props.get(handle_key))
        if await self._handle(txn, res, handle_id) is None:
            raise BadRequestError(
                f"{props.get(handle_key)!r} is not a wait condition handle of this stack",
                where=f"{where}.{handle_key}",
            )
        state = {"handle": handle_id, "count": count, "timeout": timeout, "deadline": time.time() + timeout}
        return await self._look(txn, res, physical_id, state)

    async def check(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        outcome = await self._look(txn, res, row.physical_id or "", dict(row.attributes.get(WAIT) or {}))
        if outcome.status == "IN_PROGRESS" and outcome.attributes == row.attributes:
            return Outcome(
                "IN_PROGRESS", row.physical_id, row.attributes, wake_at=outcome.wake_at
            )  # no write
        return outcome

    async def _look(self, txn: Txn, res: Res, physical_id: str, state: dict[str, Any]) -> Outcome:
        """Where the wait stands: enough signals, a FAILURE, the deadline passed, or still waiting."""
        handle = await self._handle(txn, res, str(state.get("handle") or ""))
        if handle is None:
            return Outcome("FAILED", physical_id, {WAIT: state}, "WaitConditionFailure: its handle is gone")
        signals: Mapping[str, Any] = handle.attributes.get(SIGNALS) or {}
        attrs = {WAIT: state, self.keys[3]: json.dumps({k: v.get("data") for k, v in signals.items()})}
        failures = [str(v.get("reason") or "") for v in signals.values() if v.get("status") != "SUCCESS"]
        successes = [str(v.get("reason") or "") for v in signals.values() if v.get("status") == "SUCCESS"]
        if failures:
            return Outcome("FAILED", physical_id, attrs, "WaitConditionFailure: " + ";".join(failures))
        if len(successes) >= state["count"] or handle.attributes.get(TRANSPORT) == "NO_SIGNAL":
            return done(physical_id, **attrs)
        if time.time() >= state["deadline"]:
            reason = f"WaitConditionTimeout: {len(successes)} of {state['count']} received"
            reason += f" in {state['timeout']:g} s" + (f" - {';'.join(successes)}" if successes else "")
            return Outcome("FAILED", physical_id, attrs, reason)
        return Outcome("IN_PROGRESS", physical_id, attrs, wake_at=state["deadline"])

    async def _handle(self, txn: Txn, res: Res, handle_id: str) -> ResourceRow | None:
        if not handle_id:
            return None
        found = await txn.session.scalar(
            select(ResourceRow).where(
                ResourceRow.stack_id == res.stack.id,
                ResourceRow.physical_id == handle_id,
                ResourceRow.type.in_(HANDLE_TYPES),
            )
        )
        return found


def handle_of(ref: Any) -> str:
    """A handle's id from what ``get_resource`` gave: the id itself, or an AWS handle's URL."""
    text = str(ref or "")
    if "://" in text:
        return urlsplit(text).path.rstrip("/").rpartition("/")[2]
    return text
