"""Attempts of one generation: a failed hook is run again, in the same generation, as its policy allows.

The policy comes with the document (``anneal.deployments[id].retry``; control/hot/retry.py
checks it): ``retries``, a ``backoff`` between attempts, the failures worth another attempt
(``retry_on``: exit codes, ``failure`` for any, ``timeout`` for an attempt that ran past
``attempt_timeout``; ``interrupted``, an attempt the agent's own restart cut short, is
agent/recovery.py's to run again). Every attempt has the same idempotency key and the next
``ANNEAL_RUN_ATTEMPT``; all of them together stay within the deployment's timeout. The
result carries every attempt (``anneal.attempts``); between attempts the progress tail
says that a retry is pending.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent import wire, wire_caps

#: Bytes of each attempt's stdout and stderr kept in the result's list of attempts.
TAIL_BYTES = 2048
#: A hook that ran past its deadline (agent/dispatch.py).
TIMED_OUT_CODE = 124
#: Never retried: the run was stopped by the control plane, or refused by the node's allowlist.
FINAL_CODES = frozenset({126, 143})

Attempt = Callable[[int, float], Awaitable[wire.Signal]]


@dataclass(frozen=True)
class Policy:
    retries: int = 0
    initial: float = 1.0
    factor: float = 2.0
    max: float = 60.0
    retry_on: frozenset[Any] = frozenset({"failure"})
    attempt_timeout: float | None = None

    @classmethod
    def of(cls, raw: Mapping[str, Any] | None) -> Policy:
        """The policy a document gives (the control plane checked it); none means one attempt."""
        if not raw:
            return cls()
        backoff = raw.get("backoff") or {}
        return cls(
            retries=int(raw.get("retries") or 0),
            initial=float(backoff.get("initial", 1.0)),
            factor=float(backoff.get("factor", 2.0)),
            max=float(backoff.get("max", 60.0)),
            retry_on=frozenset(raw.get("retry_on") or ["failure"]),
            attempt_timeout=float(raw["attempt_timeout"]) if raw.get("attempt_timeout") else None,
        )

    def delay(self, retry: int) -> float:
        """Seconds before retry number *retry* (1, 2, ...)."""
        return float(min(self.max, self.initial * self.factor ** (retry - 1)))

    def wants(self, signal: wire.Signal, timed_out: bool) -> bool:
        """True when *signal*'s failure is one this policy runs again."""
        code = signal.status_code
        if code == 0 or code in FINAL_CODES:
            return False
        if timed_out:
            return "timeout" in self.retry_on
        return "failure" in self.retry_on or code in self.retry_on


Note = Callable[[dict[str, Any] | None], None]


async def run(
    policy: Policy,
    first: int,
    budget: float,
    attempt: Attempt,
    say: Callable[[bytes], None],
    note: Note = lambda retry: None,
) -> wire.Signal:
    """Run attempts *first*, *first* + 1, ... within *budget* seconds; the last one's result, with all of them.

    *say* adds to the output tail; *note* tells the progress reports about the retry
    (``{retry, of, in, after}`` while one is pending, ``{retry, of}`` while it runs).
    """
    deadline = time.monotonic() + budget
    done: list[dict[str, Any]] = []
    number = first
    while True:
        left = max(1.0, deadline - time.monotonic())
        limit = min(left, policy.attempt_timeout) if policy.attempt_timeout else left
        started = time.time()
        signal = await attempt(number, limit)
        timed_out = signal.status_code == TIMED_OUT_CODE and limit < left
        done.append(_record(number, signal, started, timed_out))
        retry = number  # attempts count from 1 across agent restarts, so retries do too
        wait = policy.delay(retry)
        if (
            retry > policy.retries
            or not policy.wants(signal, timed_out)
            or time.monotonic() + wait >= deadline
        ):
            break
        after = "timeout" if timed_out else f"exit {signal.status_code}"
        note({"retry": retry, "of": policy.retries, "in": wait, "after": after})
        say(
            f"\nanneal: attempt {number} failed with status code {signal.status_code}; "
            f"attempt {number + 1} (retry {retry} of {policy.retries}) in {wait:g} s\n".encode()
        )
        await asyncio.sleep(wait)
        note({"retry": retry, "of": policy.retries})
        number += 1
    if policy.retries == 0:
        return signal
    return wire.Signal(signal.status_code, signal.stdout, signal.stderr, signal.outputs, {"attempts": done})


def _record(number: int, signal: wire.Signal, started: float, timed_out: bool) -> dict[str, Any]:
    return {
        "attempt": number,
        "status_code": signal.status_code,
        "started_at": started,
        "ended_at": time.time(),
        "timed_out": timed_out,
        "stdout": wire_caps.trim_stream(signal.stdout, TAIL_BYTES),
        "stderr": wire_caps.trim_stream(signal.stderr, TAIL_BYTES),
    }
