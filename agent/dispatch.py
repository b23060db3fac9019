"""Which hook runs a deployment, and running it with a deadline.

A group maps to an executable of that name in the hook dirs first (so hooks
written for Heat's agents run unchanged), then to a built-in hook run as
``python -m hooks.<group>``, but for ``script``, which the agent runs itself
(``agent.inline``: no interpreter start-up per deployment). A hook that
produces no result is a failure with the reason, never a silent success.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from agent import inline, output, wire, wire_caps, wire_files

log = logging.getLogger(__name__)
BUILTIN_HOOKS = frozenset({"script", "puppet", "ansible", "salt", "chef", "docker-compose"})
#: Groups Heat's agent skips when no hook is installed for them (55-heat-config's whitelist, and
#: heat-agents' apply-config, whose os-apply-config this agent does not run): they complete.
SKIPPED_GROUPS = frozenset({"os-apply-config", "apply-config"})
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: Grace between the hook's own timeout and the agent killing its process group.
KILL_GRACE = 15.0
#: The most of a hook's stdout the agent reads (a result bigger than a signal is useless).
MAX_HOOK_STDOUT = 2 * wire_caps.MAX_SIGNAL_BYTES
#: The most of a hook's stderr the agent keeps (head and tail); all of it feeds progress.
MAX_HOOK_STDERR = 4 * wire_caps.MAX_STREAM_BYTES


def hook_argv(group: str, hook_dirs: Sequence[str]) -> list[str] | None:
    """The command for *group*, or None when no hook exists for it."""
    name = _UNSAFE.sub("", group)
    if not name:
        return None
    for directory in hook_dirs:
        path = Path(directory) / name
        if path.is_file() and os.access(path, os.X_OK):
            return [str(path)]
    if name in BUILTIN_HOOKS:
        return builtin_argv(name)
    return None


def builtin_argv(name: str) -> list[str]:
    """The command of built-in hook *name*; the agent runs ``script``'s itself (``run_hook``)."""
    return [sys.executable, "-m", f"hooks.{name.replace('-', '_')}"]


def missing_hook(group: str, hook_dirs: Sequence[str]) -> wire.Signal:
    """A group without a hook fails, naming the dirs searched; Heat's skipped groups complete."""
    if group in SKIPPED_GROUPS:
        return wire.Signal(
            stderr=(
                f"group {group!r} skipped, as Heat's agent skips it: its config is data for "
                f"os-apply-config, which this agent does not run (no hook in {list(hook_dirs)})"
            )
        )
    return wire.Signal(
        status_code=127,
        stderr=(
            f"no hook for group {group!r}: built-in hooks are {sorted(BUILTIN_HOOKS)}; "
            f"hook dirs searched: {list(hook_dirs)}"
        ),
    )


def unsafe_names(item: wire.DeploymentItem) -> wire.Signal | None:
    """A failure when the id or an output name cannot be part of a file name, else None.

    Hooks written for Heat's agents open ``<heat_outputs_path>.<name>`` unchecked, so an
    output named ``../x`` would read a file outside their outputs dir: such items never run.
    """
    bad = [] if wire.safe_output_name(item.id) else [f"deployment id {item.id!r}"]
    bad += [f"output name {o.name!r}" for o in item.outputs if not wire.safe_output_name(o.name)]
    if not bad:
        return None
    rule = "letters, digits, '_', '.' and '-' only, no '..'"
    return wire.Signal(status_code=1, stderr=f"{', '.join(bad)}: not safe in a file name ({rule}); not run")


def coerce_inputs(item: Mapping[str, object]) -> dict[str, object]:
    """Heat's agent turns String inputs that are not strings into strings; so do we (as JSON).

    A binary file's envelope (agent/wire_files.py) stays one: the hook opens it into its bytes.
    """
    out = dict(item)
    inputs = []
    for i in item.get("inputs") or []:  # type: ignore[attr-defined]
        entry = dict(i)
        value = entry.get("value")
        binary = wire_files.opened(value) is not None
        if (
            entry.get("type", "String") == "String"
            and value is not None
            and not isinstance(value, str)
            and not binary
        ):
            entry["value"] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        inputs.append(entry)
    out["inputs"] = inputs
    return out


def hook_env(
    settings: Mapping[str, str],
    state_dir: Path,
    item_id: str,
    meta: wire.ItemMeta | None,
    timeout: float,
    run: int,
) -> dict[str, str]:
    """The hook's environment: the agent's own, the hook *settings*, and the ``ANNEAL_*`` names."""
    env = {**os.environ, **settings}
    env["ANNEAL_HOOK_WORKDIR"] = str(state_dir / "hooks")
    env["ANNEAL_HOOK_TIMEOUT"] = f"{timeout:g}"
    if meta is not None:
        env["DEPLOY_IDEMPOTENCY_KEY"] = meta.hash
        env["ANNEAL_SEALED"] = ",".join(meta.sealed)  # fields that were secret: hooks keep no copy
    env.update(ANNEAL_IDEMPOTENCY_KEY=item_id, ANNEAL_RUN_ATTEMPT=str(run))
    env["ANNEAL_HOOK_STDOUT_COPY"] = str(output.stdout_copy_path(state_dir, item_id))
    return env


async def run_hook(
    argv: Sequence[str],
    item: wire.DeploymentItem,
    *,
    env: Mapping[str, str],
    timeout: float,
    tee: tuple[Path, Path] | None = None,
    on_start: Callable[[int], None] | None = None,
    on_stderr: Callable[[bytes], None] | None = None,
) -> wire.Signal:
    """Run one hook in its own process group; its stdout JSON is the result.

    *tee* names files that get a copy of stdout and stderr as they arrive (so a crash of the
    agent loses none of it); *on_start* gets the hook's pid once it runs.
    """
    if (refused := unsafe_names(item)) is not None:
        return refused
    stdin = json.dumps(coerce_inputs(item.to_json())).encode()
    if list(argv) == builtin_argv("script"):
        # What the hook would read on stdin, without starting an interpreter to read it (agent/inline.py).
        deployment = wire.decode_item(json.loads(stdin))
        return await inline.run_script(
            deployment, env=env, timeout=timeout, tee=tee, on_start=on_start, on_stderr=on_stderr
        )
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as e:
        return wire.Signal(status_code=127, stderr=f"hook {argv[0]} could not start: {e}")
    if on_start is not None:
        on_start(proc.pid)
    try:
        async with asyncio.timeout(timeout + KILL_GRACE):
            out, err = await _communicate(proc, stdin, on_stderr, tee)
    except TimeoutError:
        await _stop(proc)
        return wire.Signal(status_code=124, stderr=f"hook {argv[0]} timed out after {timeout:g} s; killed")
    except asyncio.CancelledError:
        await _stop(proc)  # the agent is stopping: the ledger reports this run as interrupted
        raise
    return result_from(proc.returncode or 0, out, err, argv[0])


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the hook (it stops its tool's process group), SIGKILL its group after a grace."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        async with asyncio.timeout(10):
            await asyncio.shield(proc.wait())
    except TimeoutError:
        _kill_group(proc)
        await proc.wait()


async def _communicate(
    proc: asyncio.subprocess.Process,
    stdin: bytes,
    on_stderr: Callable[[bytes], None] | None,
    tee: tuple[Path, Path] | None = None,
) -> tuple[bytes, bytes]:
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(stdin)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await proc.stdin.drain()
    proc.stdin.close()
    out_tee, err_tee = tee if tee is not None else (None, None)
    err_sink = output.open_tee(err_tee)
    try:
        out, err = await asyncio.gather(
            _read_capped(proc.stdout, MAX_HOOK_STDOUT, out_tee),
            _read_head_and_tail(proc.stderr, MAX_HOOK_STDERR, output.teeing(err_sink, err_tee, on_stderr)),
        )
    finally:
        output.close_quietly(err_sink)
    await proc.wait()
    return out, err


async def _read_capped(stream: asyncio.StreamReader, cap: int, tee: Path | None = None) -> bytes:
    """Read to EOF, keeping at most *cap* bytes (the rest is drained and dropped).

    With *tee*, up to *cap* bytes also go to that file as they arrive; a full disk stops the
    copy (logged once), never the hook.
    """
    kept = bytearray()
    sink = output.open_tee(tee)
    try:
        while chunk := await stream.read(65536):
            if len(kept) < cap:
                part = chunk[: cap - len(kept)]
                kept.extend(part)
                if sink is not None:
                    try:
                        sink.write(part)
                        sink.flush()
                    except OSError as e:
                        log.warning("copy of hook output to %s stopped: %s", tee, e)
                        output.close_quietly(sink)
                        sink = None
    finally:
        output.close_quietly(sink)
    return bytes(kept)


async def _read_head_and_tail(
    stream: asyncio.StreamReader, cap: int, on_chunk: Callable[[bytes], None] | None
) -> bytes:
    """Read to EOF, handing each chunk to *on_chunk*; keep the first and last cap/2 bytes."""
    head, tail, total = bytearray(), bytearray(), 0
    while chunk := await stream.read(65536):
        total += len(chunk)
        if on_chunk is not None:
            on_chunk(chunk)
        room = cap // 2 - len(head)
        head += chunk[: max(room, 0)]
        tail += chunk[max(room, 0) :]
        if len(tail) > cap:
            del tail[: len(tail) - cap // 2]
    tail = tail[-(cap // 2) :]
    cut = total - len(head) - len(tail)
    return bytes(head) + (f"\n[... {cut} bytes cut ...]\n".encode() if cut > 0 else b"") + bytes(tail)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def result_from(rc: int, out: bytes, err: bytes, hook: str) -> wire.Signal:
    """Heat's rule: a JSON object on stdout is the result; anything else is a failure."""
    text_err = err.decode("utf-8", "replace")
    try:
        obj = json.loads(out) if out.strip() else None
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        try:
            return wire.decode_signal(obj, "hook result")
        except wire.WireError as e:
            return wire.Signal(status_code=rc or 1, stderr=f"hook {hook} gave a bad result: {e}\n{text_err}")
    reason = "printed no result" if obj is None else "printed something other than a JSON object"
    return wire.Signal(
        status_code=rc or 1,
        stdout=wire_caps.trim_stream(out.decode("utf-8", "replace")),
        stderr=wire_caps.trim_stream(f"hook {hook} exited with code {rc} and {reason}\n{text_err}"),
    )
