"""The built-in ``script`` hook, run by the agent itself: no second interpreter per deployment.

``python -m hooks.script`` cost an interpreter start-up (about 60 ms) for every deployment
to fork one script. Here the agent writes the script and starts it from its own event loop
with what that hook gives it (``hooks.script.hook.prepare``: environment, working dir, output
files, deadline) and reports it the same way (``finish``). As the hook did, the script runs
in a session of its own; its output is copied as it comes to the files crash recovery reads
and to the progress reports; at its deadline, or when the agent stops it, its whole process
tree is stopped (SIGTERM, SIGKILL after ``KILL_GRACE``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from agent import output, proctree, wire
from hooks.common import HookContext, failure
from hooks.errors import HookError
from hooks.process import (
    DRAIN_GRACE,
    KILL_GRACE,
    Capture,
    ToolResult,
    alive,
    not_started,
    signal_all,
    tool_result,
)
from hooks.script import hook as script

log = logging.getLogger(__name__)
_CHUNK = 65536


async def run_script(
    deployment: wire.DeploymentItem,
    *,
    env: Mapping[str, str],
    timeout: float,
    tee: tuple[Path, Path] | None,
    on_start: Callable[[int], None] | None,
    on_stderr: Callable[[bytes], None] | None,
) -> wire.Signal:
    """Run *deployment*'s script as ``python -m hooks.script`` would, with *env* as that hook's environment."""
    try:
        ctx = HookContext.from_env("script", deployment, env)
        plan = script.prepare(deployment, ctx, env)
        if plan is None:
            return wire.Signal()
        copy = env.get("ANNEAL_HOOK_STDOUT_COPY")
        try:
            result = await run_tool(
                plan.argv,
                env=plan.env,
                cwd=ctx.working_dir,
                timeout=ctx.timeout or timeout,
                copies=(Path(copy) if copy else None, tee[1] if tee else None),
                on_start=on_start,
                on_output=on_stderr,
                # The line the hook logged first: the copy and the progress reports show what ran.
                banner=f"deployment {deployment.id}: running {plan.argv[-1]} with {plan.argv[0]}\n",
            )
        finally:
            script.forget(plan)  # a sealed config leaves no copy, as with the hook
        return script.finish(deployment, plan, result)
    except HookError as e:
        log.error("deployment %s: %s", deployment.id, e)
        return failure(str(e), e.status_code)
    except Exception as e:  # as the hook's main(): a failure reported, never a crash of the agent
        log.exception("hook script failed on deployment %s", deployment.id)
        return failure(f"hook script failed: {e}")


async def run_tool(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float,
    copies: tuple[Path | None, Path | None],
    on_start: Callable[[int], None] | None,
    on_output: Callable[[bytes], None] | None,
    banner: str = "",
) -> ToolResult:
    """``hooks.process.run_tool`` on the event loop: *copies* get stdout alone and both streams.

    *banner* goes first into the copy of both streams and to *on_output*, once the tool runs.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as e:
        return not_started(argv, e)
    if on_start is not None:
        on_start(proc.pid)
    out, err = Capture(), Capture()
    sinks = [output.open_tee(path) for path in copies]
    both = output.teeing(sinks[1], copies[1], on_output)
    if banner and both is not None:
        both(banner.encode())
    assert proc.stdout is not None and proc.stderr is not None
    pump = asyncio.gather(
        _copy(proc.stdout, out, output.teeing(sinks[0], copies[0], both)), _copy(proc.stderr, err, both)
    )
    try:
        return await _finish(proc, pump, argv[0], timeout, out, err)
    finally:
        for sink in sinks:
            output.close_quietly(sink)


async def _finish(
    proc: asyncio.subprocess.Process,
    pump: asyncio.Future[tuple[None, None]],
    program: str,
    timeout: float,
    out: Capture,
    err: Capture,
) -> ToolResult:
    """Wait for both pipes to close, or stop the tree at *timeout* (or when cancelled)."""
    try:
        async with asyncio.timeout(timeout):
            await asyncio.shield(pump)
    except TimeoutError:
        pass
    except BaseException:  # cancelled: the agent stops this run (a stop order, or SIGTERM)
        await stop_tree(proc)
        pump.cancel()
        raise
    if pump.done():
        return tool_result(await proc.wait(), out, err)
    exited = proc.returncode is not None
    await stop_tree(proc)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_GRACE):
            await pump
    if exited:  # the script ended, but a process it started kept its output open
        note = f"{program}: a background process still held the output open after {timeout:g} s"
        return tool_result(await proc.wait(), out, err, note + "; it was stopped")
    return tool_result(124, out, err, f"{program} timed out after {timeout:g} s", timed_out=True)


async def _copy(stream: asyncio.StreamReader, capture: Capture, feed: Callable[[bytes], None] | None) -> None:
    while chunk := await stream.read(_CHUNK):
        capture.add(chunk)
        if feed is not None:
            feed(chunk)


async def stop_tree(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the script's tree and group; SIGKILL whatever is left after KILL_GRACE."""
    pids = {proc.pid, *proctree.descendants(proc.pid)}
    signal_all(proc.pid, pids, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE
    while time.monotonic() < deadline:
        if not alive(proc.pid, pids):
            break
        await asyncio.sleep(0.05)
    else:
        signal_all(proc.pid, pids | proctree.descendants(proc.pid), signal.SIGKILL)
    await proc.wait()
