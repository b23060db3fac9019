"""The agent's attempts of one generation (agent/attempts.py): which failures run again, when, and what is kept."""

from __future__ import annotations

import asyncio

from agent import attempts, wire

FAST = {"retries": 3, "backoff": {"initial": 0.01, "factor": 2, "max": 0.02}}


def scripted(codes: list[int], seen: list[tuple[int, float]]) -> attempts.Attempt:
    """An attempt that answers the next of *codes* and notes its number and time limit."""

    async def attempt(number: int, limit: float) -> wire.Signal:
        seen.append((number, limit))
        code = codes[len(seen) - 1]
        return wire.Signal(code, f"out {number}", f"err {number}")

    return attempt


def run(
    policy: dict[str, object], codes: list[int], first: int = 1, budget: float = 60
) -> tuple[wire.Signal, list[tuple[int, float]], list[bytes]]:
    seen: list[tuple[int, float]] = []
    said: list[bytes] = []
    signal = asyncio.run(
        attempts.run(attempts.Policy.of(policy), first, budget, scripted(codes, seen), said.append)
    )
    return signal, seen, said


def test_failures_run_again_until_one_succeeds_and_every_attempt_is_kept() -> None:
    """Codes 3, 3, 0: three attempts numbered from the first run, the last result, all three listed."""
    signal, seen, said = run(FAST, [3, 3, 0], first=2)
    assert [2, 3, 4] == [n for n, _ in seen]
    assert 0 == signal.status_code and "out 4" == signal.stdout
    assert [(2, 3), (3, 3), (4, 0)] == [(a["attempt"], a["status_code"]) for a in signal.extra["attempts"]]
    assert 2 == len(said) and b"attempt 2 failed with status code 3" in said[0]


def test_retries_stop_when_exhausted_and_for_codes_retry_on_does_not_name() -> None:
    """retries 3 allows 4 attempts; retry_on [7] runs exit 3 once; 126 and 143 are never retried."""
    assert 4 == len(run(FAST, [1, 1, 1, 1, 1])[1])
    assert 1 == len(run({**FAST, "retry_on": [7]}, [3, 3])[1])
    assert 2 == len(run({**FAST, "retry_on": [7]}, [7, 3])[1])
    assert 1 == len(run(FAST, [143, 0])[1]) and 1 == len(run(FAST, [126, 0])[1])


def test_no_policy_is_one_attempt_with_the_result_unchanged() -> None:
    """Without retries the hook's own signal comes back as it was, with no attempts list."""
    signal, seen, _ = run({}, [5])
    assert (1, 5, {}) == (len(seen), signal.status_code, dict(signal.extra))


def test_attempt_timeout_limits_each_attempt_and_timeout_is_retried_only_when_named() -> None:
    """Each attempt gets attempt_timeout; a 124 within it is a timeout, retried only with retry_on timeout."""
    policy = {**FAST, "attempt_timeout": 5, "retry_on": ["timeout"]}
    signal, seen, _ = run(policy, [124, 124, 0])
    assert [5.0, 5.0, 5.0] == [limit for _, limit in seen]
    assert [True, True, False] == [a["timed_out"] for a in signal.extra["attempts"]]
    assert 1 == len(run({**FAST, "attempt_timeout": 5}, [124, 0])[1])  # retry_on [failure] is not timeout


def test_backoff_grows_by_its_factor_up_to_its_max() -> None:
    """initial 1, factor 3, max 5: 1, 3, 5, 5 seconds."""
    policy = attempts.Policy.of({"retries": 4, "backoff": {"initial": 1, "factor": 3, "max": 5}})
    assert [1.0, 3.0, 5.0, 5.0] == [policy.delay(n) for n in (1, 2, 3, 4)]


def test_no_retry_starts_past_the_deployment_budget() -> None:
    """A backoff that would end after the whole budget ends the attempts with the last result."""
    signal, seen, _ = run({"retries": 3, "backoff": {"initial": 30}}, [3, 0], budget=10)
    assert (1, 3) == (len(seen), signal.status_code)
