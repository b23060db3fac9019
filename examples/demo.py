"""`make demo`: a two-server stack converges, a blue/green update re-points the frontend.

Starts the control plane (SQLite, HTTP transport, loopback, local agents),
then drives it with the real `anneal` CLI, checking each step; exits 0 only
when every step worked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
# `python examples/demo.py` puts examples/, not the repository, on the path: the harness is tests/support.
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane  # noqa: E402
from tests.support.processes import BIN, free_port  # noqa: E402

STACK = "demo"


class DemoError(Exception):
    pass


def banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def anneal(*args: str, capture: bool = False) -> str:
    """Run the real CLI; fail the demo if it fails."""
    argv = [str(BIN / "anneal"), *args]
    print("$ anneal " + " ".join(args), flush=True)
    proc = subprocess.run(argv, text=True, capture_output=capture, timeout=600, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or "") if capture else ""
        raise DemoError(f"`anneal {' '.join(args)}` exited with {proc.returncode} {detail}")
    return proc.stdout or ""


def outputs() -> dict[str, object]:
    data = json.loads(anneal("stack", "outputs", STACK, "-f", "json", capture=True))
    return {o["output_key"]: o["output_value"] for o in data}


def tour() -> None:
    template = str(HERE / "blue-green.yaml")
    banner("create the stack (two servers, a backend and a frontend) and watch it converge")
    anneal("stack", "create", STACK, "-t", template, "--wait")
    anneal("deployment", "list", "--stack", STACK)
    first = outputs()
    anneal("stack", "outputs", STACK)
    if first["frontend_upstream"] != first["backend_address"] or "(v1)" not in str(first["frontend_saw"]):
        raise DemoError(f"frontend is not pointed at the v1 backend: {first}")

    banner("blue/green: backend_version v1 -> v2 (new backend first, frontend re-pointed, old one stopped)")
    anneal("stack", "update", STACK, "-t", template, "-P", "backend_version=v2", "--wait")
    anneal("deployment", "list", "--stack", STACK)
    second = outputs()
    anneal("stack", "outputs", STACK)
    if second["backend_address"] == first["backend_address"]:
        raise DemoError("the backend was not replaced")
    if second["frontend_upstream"] != second["backend_address"] or "(v2)" not in str(second["frontend_saw"]):
        raise DemoError(f"frontend is not pointed at the v2 backend: {second}")
    try:
        urllib.request.urlopen(f"http://{first['backend_address']}/", timeout=2)
        raise DemoError("the old v1 backend is still running after the update")
    except OSError:
        print(
            f"old backend at {first['backend_address']} is stopped; "
            f"frontend now uses {second['frontend_upstream']}"
        )

    banner("the stack's events")
    anneal("stack", "events", STACK)
    banner("final status")
    anneal("stack", "show", STACK)
    banner("delete the stack (the backend's DELETE config stops the service)")
    anneal("stack", "delete", STACK, "--wait")


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="anneal-demo-"))
    port = free_port()
    cp: ControlPlane | None = None
    passed = False
    try:
        banner(f"control plane on http://127.0.0.1:{port} (SQLite in {work / 'data'}, local agents)")
        # The tests' harness with the demo's quieter defaults (a failed start raises AssertionError).
        cp = start_control_plane(
            work, port=port, defaults=("--provisioner", "local", "--log-level", "WARNING")
        )
        os.environ["ANNEAL_URL"] = cp.url
        os.environ["ANNEAL_TOKEN"] = cp.token
        tour()
        banner("demo passed")
        passed = True
        return 0
    except (DemoError, AssertionError, OSError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
        print(f"\ndemo FAILED: {e}\nlogs are kept in {work}", file=sys.stderr)
        return 1
    finally:
        if cp is not None:
            stop_control_plane(cp)
        if passed:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
