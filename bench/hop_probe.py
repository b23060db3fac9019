"""Run `anneal serve` or `anneal-agent` with time stamps at the steps of a deployment's hop (bench/hop_trace.py).

    python bench/hop_probe.py [PATH/anneal] serve ARGS...   # with HOP_STAMPS=FILE in the environment
    python bench/hop_probe.py agent run ARGS...

Each step named below is wrapped so that its start (``name>``) and end (``name<``) are
appended to FILE as ``time.time()`` lines; the agent's document fetch and poll are
stamped only when they brought a document. A probe, not a product path: nothing here
runs unless a bench starts it.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: The stamps' file, opened by ``main``.
_out: list[IO[str]] = []


def stamp(event: str) -> None:
    _out[0].write(f"{time.time():.6f} {event}\n")
    _out[0].flush()


def wrap(owner: Any, name: str, event: str, kept: Callable[[Any], bool] | None = None) -> None:
    """Stamp *owner.name*'s start and end; the end only where *kept* says its result counts."""
    original: Callable[..., Awaitable[Any]] = getattr(owner, name)

    @functools.wraps(original)
    async def stamped(*args: Any, **kwargs: Any) -> Any:
        stamp(event + ">")
        result = await original(*args, **kwargs)
        if kept is None or kept(result):
            stamp(event + "<")
        return result

    setattr(owner, name, stamped)


def control_plane() -> None:
    """The engine's step and its release, the commit, the render and sign, the long-poll's answer, a signal."""
    from control import runtime, txn  # noqa: PLC0415 (only in the probed process)
    from control.engine import worker  # noqa: PLC0415
    from control.services import agents  # noqa: PLC0415

    wrap(worker.Engine, "step", "step")
    wrap(worker.Engine, "_finish", "release")
    wrap(txn.Txn, "commit", "commit")
    wrap(runtime.Runtime, "_publish", "render")
    wrap(agents, "check_still_held", "answer")
    wrap(agents, "record_signal", "signal")


def agent() -> None:
    """The document's fetch and acceptance, the hook's run and its tool, the signal's delivery."""
    from agent import inline, loop, outbox  # noqa: PLC0415 (only in the probed process)
    from agent.transports import switch  # noqa: PLC0415

    wrap(switch.AgentTransport, "fetch", "fetch", kept=lambda r: r.body is not None)
    wrap(loop.Agent, "poll", "accept", kept=bool)
    wrap(loop.Agent, "_run_hook", "hook")
    wrap(inline, "run_tool", "tool")
    wrap(outbox.Outbox, "_deliver", "deliver")


def main(argv: list[str]) -> int:
    _out.append(open(os.environ["HOP_STAMPS"], "a"))  # noqa: SIM115 (the process's whole life)
    if Path(argv[0]).name == "anneal":  # a wrapper's argv: the command's path comes first
        argv = argv[1:]
    if argv[0] == "serve":
        from control.cli import main as serve  # noqa: PLC0415

        control_plane()
        return serve(argv)
    from agent.cli import main as run_agent  # noqa: PLC0415

    agent()
    return run_agent(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
