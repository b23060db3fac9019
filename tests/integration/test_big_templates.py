"""A stack too big for the default caps goes in through the front door once the operator raises them.

`anneal serve --max-template-bytes` raises the template cap (Heat's 512 KiB by default)
and, with it, the request cap (twice the template cap, at least 2 MiB). The CLI's
`--wait` reads only the stack's state and the new events while it waits, so waiting on a
big stack costs the control plane little: `GET /v1/stacks/NAME?summary=true` and
`/events?traversal=T&limit=1` are checked here too.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, serve_once, start_control_plane, stop_control_plane

#: 2,000 OS::Heat::None resources of about 1.2 KB each: a 2.5 MB JSON template.
FILLERS = 2000


def big_template(path: Path) -> int:
    """Write a JSON template of one real deployment and FILLERS padded no-op resources; its size."""
    resources: dict[str, object] = {
        "box": {"type": "OS::Heat::DeployedServer"},
        "cfg": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {
                "group": "script",
                "config": '#!/bin/sh\nprintf big > "$heat_outputs_path.said"\n',
                "outputs": [{"name": "said"}],
            },
        },
        "dep": {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {"config": {"get_resource": "cfg"}, "server": {"get_resource": "box"}},
        },
    }
    for i in range(FILLERS):
        resources[f"filler{i}"] = {"type": "OS::Heat::None", "properties": {"note": f"{i:06d}" + "x" * 1200}}
    text = json.dumps(
        {
            "heat_template_version": "2018-08-31",
            "resources": resources,
            "outputs": {"said": {"value": {"get_attr": ["dep", "said"]}}},
        }
    )
    path.write_text(text)
    return len(text)


@pytest.fixture
def big_cp(tmp_path: Path) -> Iterator[ControlPlane]:
    (tmp_path / "cp").mkdir()
    cp = start_control_plane(tmp_path / "cp", "--max-template-bytes", "3M")
    yield cp
    stop_control_plane(cp)


def test_raised_caps_take_a_big_template_through_the_cli(big_cp: ControlPlane, tmp_path: Path) -> None:
    """A 2.5 MB template (over the default 512 KiB and 2 MiB caps) is created with `stack create --wait`."""
    cp = big_cp
    size = big_template(tmp_path / "big.json")
    assert 2 * 1024 * 1024 < size < 3 * 1024 * 1024
    done = cp.cli("stack", "create", "big", "-t", str(tmp_path / "big.json"), "--wait", timeout=600)
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "stack big: CREATE_COMPLETE" in done.stdout
    assert "dep " in done.stdout and "filler1999 " in done.stdout  # the events of the create, printed live
    assert {"said": "big"} == cp.outputs("big")
    assert FILLERS + 3 == len(cp.api("GET", "/v1/stacks/big/resources").body)


def test_caps_above_the_raised_ones_still_refuse_naming_them(big_cp: ControlPlane, tmp_path: Path) -> None:
    """Over the raised template cap: 400 naming 3 MiB; over the derived request cap: 413 naming 6 MiB."""
    cp = big_cp
    over = cp.create("over", "description: " + "x" * (3 * 1024 * 1024) + "\n")
    assert 400 == over.status
    assert f"more than the limit of {3 * 1024 * 1024}" in over.body["error"]["message"]
    # The 413 comes from the headers, before the body, and the connection is closed: curl, as a
    # real client, reads that early answer and stops sending (urllib fails on the broken pipe).
    body = tmp_path / "huge.json"
    body.write_bytes(b'{"name": "x", "template": "' + b"y" * (7 * 1024 * 1024) + b'"}')
    huge = subprocess.run(
        [
            *(
                "curl",
                "-sS",
                "-H",
                f"Authorization: Bearer {cp.token}",
                "-H",
                "Content-Type: application/json",
            ),
            *("--data-binary", f"@{body}", "-w", "\n%{http_code}", f"{cp.url}/v1/stacks"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    answer, _, status = huge.stdout.rpartition("\n")
    assert "413" == status, huge.stdout + huge.stderr
    assert f"cap of {6 * 1024 * 1024} bytes" in json.loads(answer)["error"]["message"]
    assert [] == cp.api("GET", "/v1/stacks").body


def test_default_caps_refuse_the_big_template(control_plane: ControlPlane, tmp_path: Path) -> None:
    """The same template against a control plane with default caps: refused whole, nothing created."""
    cp = control_plane
    big_template(tmp_path / "big.json")
    done = cp.cli("stack", "create", "big", "-t", str(tmp_path / "big.json"))
    assert 1 == done.returncode
    assert "413" in done.stderr or "cap of 2097152" in done.stderr, done.stderr
    assert [] == cp.api("GET", "/v1/stacks").body


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-template-bytes", "4M", "--max-request-bytes", "1M"], "is below --max-template-bytes"),
        (["--max-template-bytes", "12Q"], "expected bytes, e.g. 524288, 512K or 16M"),
    ],
)
def test_serve_refuses_caps_that_cannot_work(tmp_path: Path, args: list[str], message: str) -> None:
    """A request cap below the template cap, or a size it cannot read: exit 2 naming the option."""
    done = serve_once(tmp_path, *args)
    assert 2 == done.returncode
    assert message in done.stderr


def test_summary_view_and_events_of_one_traversal(control_plane: ControlPlane) -> None:
    """`?summary=true` is the state alone; `?traversal=T&limit=1` is the event that started T."""
    cp = control_plane
    template = "heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None}\n"
    cp.create_stack("s", template)
    cp.update_stack("s", template + "  b: {type: OS::Heat::None}\n")
    summary = cp.api("GET", "/v1/stacks/s?summary=true").body
    assert ("UPDATE_COMPLETE", 2) == (summary["status"], summary["traversal"])
    assert "resources" not in summary and "outputs" not in summary
    assert "resources" in cp.api("GET", "/v1/stacks/s").body
    first = cp.api("GET", "/v1/stacks/s/events?traversal=2&limit=1").body
    assert [("s", "UPDATE", "IN_PROGRESS", 2)] == [
        (e["resource_name"], e["action"], e["status"], e["traversal"]) for e in first
    ]
    everything = cp.api("GET", "/v1/stacks/s/events").body
    assert next(e for e in everything if e["traversal"] == 2) == first[0]
    assert all(e["traversal"] == 1 for e in cp.api("GET", "/v1/stacks/s/events?traversal=1").body)
    for bad, where in (
        ("events?limit=0", "limit"),
        ("events?traversal=x", "traversal"),
        ("?summary=maybe", "summary"),
    ):
        resp = cp.api("GET", f"/v1/stacks/s/{bad}" if bad.startswith("events") else f"/v1/stacks/s{bad}")
        assert (400, where) == (resp.status, resp.body["error"]["where"]), bad
