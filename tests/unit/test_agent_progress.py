"""Progress reports of a running hook: coalesced, rate-bounded, heartbeat, last output flushed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent import progress
from agent.progress import Progress, progress_body


class Recorder:
    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        self.sent = asyncio.Event()

    async def __call__(self, payload: dict[str, Any]) -> bool:
        self.payloads.append(payload)
        self.sent.set()
        return True


async def wait_for_sends(rec: Recorder, count: int) -> None:
    async def until() -> None:
        while len(rec.payloads) < count:
            rec.sent.clear()
            await rec.sent.wait()

    await asyncio.wait_for(until(), 30)


async def test_output_written_between_reports_is_coalesced_into_one():
    """Many chunks before a report make one report: the newest tail and the full byte count."""
    rec = Recorder()
    reporter = Progress(rec, interval=3600, heartbeat=3600, tail_bytes=16, grace=0)
    for i in range(1000):
        reporter.feed(f"line {i}\n".encode())
    async with reporter:
        await wait_for_sends(rec, 1)
        await asyncio.sleep(0.1)
        assert len(rec.payloads) == 1
    (first,) = rec.payloads[:1]
    assert first["output_bytes"] == sum(len(f"line {i}\n") for i in range(1000))
    assert first["output_tail"].endswith("line 999\n")
    assert len(first["output_tail"].encode()) <= 16
    assert (first["status"], first["seq"]) == ("IN_PROGRESS", 1)


async def test_no_second_report_within_the_interval_and_the_rest_is_sent_at_the_end():
    """Within one interval new output waits; when the hook ends, the rest goes in a last report."""
    rec = Recorder()
    async with Progress(rec, interval=3600, heartbeat=3600, grace=0) as reporter:
        reporter.feed(b"first\n")
        await wait_for_sends(rec, 1)
        reporter.feed(b"second\n")
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert len(rec.payloads) == 1
    assert len(rec.payloads) == 2
    assert rec.payloads[-1]["output_bytes"] == len(b"first\nsecond\n")
    assert rec.payloads[-1]["output_tail"].endswith("second\n")
    assert [p["seq"] for p in rec.payloads] == [1, 2]


async def test_a_hook_done_within_the_grace_sends_no_progress():
    """A hook that ends before the grace is over is reported by its result alone: no progress goes, not
    even its output's last report (the result carries it), so the result is not held up."""
    rec = Recorder()
    async with Progress(rec, interval=0, heartbeat=0.01, grace=3600) as reporter:
        reporter.feed(b"done at once\n")
        for _ in range(20):
            await asyncio.sleep(0.01)
    assert rec.payloads == []


async def test_reports_start_after_the_grace():
    """Output written during the grace is reported once it is over, coalesced into the first report."""
    rec = Recorder()
    async with Progress(rec, interval=3600, heartbeat=3600, grace=1.0) as reporter:
        reporter.feed(b"early\n")
        await asyncio.sleep(0.05)
        assert rec.payloads == []
        reporter.feed(b"still early\n")
        await wait_for_sends(rec, 1)
    assert rec.payloads[0]["output_tail"] == "early\nstill early\n"
    assert len(rec.payloads) == 1


async def test_a_silent_hook_still_sends_heartbeats():
    """With no output, a report is still sent every heartbeat (the deployment is alive)."""
    rec = Recorder()
    async with Progress(rec, interval=0, heartbeat=0.01, grace=0):
        await wait_for_sends(rec, 3)
    assert {p["output_bytes"] for p in rec.payloads} == {0}


async def test_a_failing_send_never_stops_the_reports():
    """A send that raises is logged and the next report still goes."""
    calls: list[dict[str, Any]] = []

    async def flaky(payload: dict[str, Any]) -> bool:
        calls.append(payload)
        if len(calls) == 1:
            raise OSError("connection refused")
        return True

    async with Progress(flaky, interval=0, heartbeat=0.01, grace=0):

        async def until() -> None:
            while len(calls) < 2:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(until(), 30)
    assert len(calls) >= 2


async def test_a_report_not_taken_is_tried_again_before_the_heartbeat():
    """A silent hook's only output, refused once (the control plane restarting), is sent again
    after the interval, not a heartbeat later; then reports go at their usual pace."""
    calls: list[dict[str, Any]] = []
    taken = asyncio.Event()

    async def refused_once(payload: dict[str, Any]) -> bool:
        calls.append(payload)
        if len(calls) == 2:
            taken.set()
        return len(calls) > 1

    async with Progress(refused_once, interval=0.01, heartbeat=3600, grace=0) as reporter:
        reporter.feed(b"started\n")
        async with asyncio.timeout(30):
            await taken.wait()
        await asyncio.sleep(0.1)
    assert [(p["seq"], p["output_tail"]) for p in calls] == [(1, "started\n"), (2, "started\n")]
    assert reporter.sent == 1


def test_progress_body_keeps_the_result_path_but_never_a_status_code():
    """The body keeps the result's extras (config_id, nonce) and marks itself IN_PROGRESS."""
    result = json.dumps(
        {
            "deploy_stdout": "",
            "deploy_stderr": "",
            "deploy_status_code": 0,
            "anneal": {"config_id": "c1", "nonce": "n1"},
        }
    ).encode()
    payload = {"status": "IN_PROGRESS", "seq": 3, "output_tail": "abc", "output_bytes": 3, "elapsed": 1.0}
    body = json.loads(progress_body(result, payload))
    assert "deploy_status_code" not in body
    assert body["deploy_stdout"] == "abc"
    assert body["anneal"] == {"config_id": "c1", "nonce": "n1", **payload}
    assert progress.STATUS == "IN_PROGRESS"


async def test_output_written_as_the_hook_ends_does_not_keep_the_reporter_running():
    """The last chunk lands in the same turn as the hook's end: leaving the reporter still stops it.

    Python 3.11's wait_for returned the event's result and dropped the cancel here; the
    reporter went on sending progress every heartbeat and the agent's work loop waited on it
    forever, the deployment IN_PROGRESS for good (a CI run's three stuck CLI tests).
    """
    rec = Recorder()
    reporter = Progress(rec, interval=0.01, heartbeat=0.05, grace=0)

    async def hook_ends() -> None:
        async with reporter:
            await wait_for_sends(rec, 1)  # the heartbeat: run() now waits on new output
            await asyncio.sleep(0.02)
            reporter.feed(b"the last line\n")  # and the hook ends in the same turn

    leaving = asyncio.create_task(hook_ends())
    done, _ = await asyncio.wait({leaving}, timeout=10)  # a bound on a hang; wait() cancels nothing
    if not done:
        leaving.cancel()
        raise AssertionError(f"leaving the reporter hung; it sent {len(rec.payloads)} reports meanwhile")
    leaving.result()
    assert reporter._task.done()
    after = len(rec.payloads)
    await asyncio.sleep(0.2)  # four heartbeats: a reporter left running would send again
    assert after == len(rec.payloads)
