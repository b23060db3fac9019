"""A stack handed from one control plane to another (separate data dirs and keys): `openstack stack abandon`
on the first, `openstack stack adopt` on the second; the agent follows through a document the first signed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents import ledger_state, run_agent, start_agent, stop_agent
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.openstack import PROJECT, OpenStack, start_heat_plane, write_template
from tests.support.templates import NESTED_GROUP, NESTED_MEMBER
from tests.support.waiting import wait_until

#: Each run of the script appends its action to LOG; a hidden parameter's digest is an output.
MOVING = """
heat_template_version: 2018-08-31
parameters:
  who: {type: string}
  log: {type: string}
  pw: {type: string, hidden: true}
resources:
  box: {type: OS::Heat::DeployedServer, external_id: mover}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: WHO}, {name: LOG}, {name: PW}]
      outputs: [{name: greeting}]
      config: |
        #!/bin/sh
        echo "$deploy_action" >> "$LOG"
        printf 'hello %s (%s)' "$WHO" "${#PW}" > "$heat_outputs_path.greeting"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      actions: [CREATE, UPDATE]
      input_values: {WHO: {get_param: who}, LOG: {get_param: log}, PW: {get_param: pw}}
outputs:
  greeting: {value: {get_attr: [dep, greeting]}}
"""


#: Resources as Heat's abandon data lists them: no `resource_data.anneal`.
HEAT_MADE: dict[str, dict[str, Any]] = {
    "box": {"type": "OS::Heat::DeployedServer"},
    "cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": "true"}},
}


#: A deployment that completes at once (NO_SIGNAL) on the existing server `lonely`, which has no agent.
SHARED = """
heat_template_version: 2018-08-31
resources:
  box: {type: OS::Heat::DeployedServer, external_id: lonely}
  cfg: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: 'true'}}
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: box}, signal_transport: NO_SIGNAL}
"""


@pytest.fixture
def planes(tmp_path: Path) -> Iterator[tuple[tuple[ControlPlane, str], tuple[ControlPlane, str]]]:
    """Two control planes with Heat's API, each with its own data dir (keys, admin token, database)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = start_heat_plane(tmp_path / "a")
    try:
        b = start_heat_plane(tmp_path / "b")
    except BaseException:
        stop_control_plane(a[0])
        raise
    try:
        yield a, b
    finally:
        stop_control_plane(b[0])
        stop_control_plane(a[0])


def _runs(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def _key_file(cp: ControlPlane, path: Path) -> Path:
    shown = cp.cli("key", "show", "-f", "json")
    assert shown.returncode == 0, shown.stderr
    path.write_text(shown.stdout)
    return path


def test_openstack_abandon_then_adopt_on_another_plane_moves_the_agent_and_reruns_nothing(
    planes: tuple[tuple[ControlPlane, str], tuple[ControlPlane, str]], tmp_path: Path
) -> None:
    """`anneal stack handover` on A, `openstack stack abandon` there, `openstack stack adopt` on B, the agent stopped
    meanwhile: started again, it takes B's URL and key from A's signed document, nothing re-runs, the outputs are
    intact, and an update on B runs."""
    (a, a_heat), (b, b_heat) = planes
    osc_a, osc_b = OpenStack(a, f"{a_heat}/v1/{PROJECT}"), OpenStack(b, f"{b_heat}/v1/{PROJECT}")
    state, log, canary = tmp_path / "agent", tmp_path / "runs.log", "canary-handed-over-secret"
    member = a.api("POST", "/v1/tokens", {"project": PROJECT, "role": "member"}).body["token"]
    agent = start_agent(a, "mover", state, tmp_path / "agent.log", poll_wait=2, token=member)
    try:
        a.wait_enrolled("mover")
        template = write_template(tmp_path, "moving.yaml", MOVING)
        params = ["--parameter", "who=first", "--parameter", f"log={log}", "--parameter", f"pw={canary}"]
        osc_a.ok("stack", "create", "-t", template, *params, "--wait", "moving")
        assert _runs(log) == ["CREATE"]
        stop_agent(agent)  # offline through the hand-over: A keeps serving it
        b_key = json.loads(_key_file(b, tmp_path / "b-key.json").read_text())
        handed = a.cli("stack", "handover", "moving", "--to", b.url, "--to-key", str(tmp_path / "b-key.json"))
        assert handed.returncode == 0, handed.stderr
        data_file = tmp_path / "moving.json"
        osc_a.ok("stack", "abandon", "moving", "--output-file", str(data_file))
        text = data_file.read_text()
        section = json.loads(text)["anneal_handover"]
        assert canary not in text and set(section["records"]) == {"anneal_sealed", "kid", "ct"}
        assert section["to_key_id"] == b_key["key_id"]
        altered = json.loads(text)
        altered["anneal_handover"]["records"]["ct"] = altered["anneal_handover"]["records"]["ct"][::-1]
        tampered = b.api("POST", "/v1/adopt", {"name": "moved", "adopt_stack_data": altered})
        assert (tampered.status, tampered.body["error"]["where"]) == (
            400,
            "adopt_stack_data.anneal_handover.records",
        )
        assert "ADOPT_COMPLETE" in osc_b.ok(
            "stack", "adopt", "--adopt-file", str(data_file), "--wait", "moved"
        )
        agent = run_agent(state, tmp_path / "agent.log")
        # The agent took B's key and URL from A's signed hand-over, and accepted B's document.
        wait_until(
            lambda: ledger_state(state, "trusted_key") == b_key["public_key"], "the agent never took B's key"
        )
        wait_until(lambda: _signer(state) == b_key["key_id"], "the agent never accepted a document of B")
        held = json.loads(ledger_state(state, "document") or "{}")
        assert len(held["deployments"]) == 1  # the same generation, which its ledger holds as done
        assert a.api("GET", "/v1/servers/mover").body["handed_over_to"] == b.url
        config = json.loads((state / "agent.json").read_text())
        assert (config["url"], config["document_url"]) == (b.url, f"{b.url}/v1/agent/document")
        assert _runs(log) == ["CREATE"]
        assert b.outputs("moved")["greeting"] == f"hello first ({len(canary)})"
        # A later update on B (keeping the adopted hidden value) runs on the moved agent.
        assert (
            202
            == b.api("PUT", "/v1/stacks/moved", {"existing": True, "parameters": {"who": "second"}}).status
        )
        b.settled("moved", "UPDATE_COMPLETE", 120)
        assert _runs(log) == ["CREATE", "UPDATE"]
        assert b.outputs("moved")["greeting"] == f"hello second ({len(canary)})"
        # The data was for B: A (another key) refuses it, naming the place.
        refused = a.api("POST", "/v1/adopt", {"name": "back", "adopt_stack_data": json.loads(text)})
        assert (refused.status, refused.body["error"]["where"]) == (
            400,
            "adopt_stack_data.anneal_handover.to_key_id",
        )
    finally:
        stop_agent(agent)


def _signer(state: Path) -> str:
    """The key id that signed the document the agent in *state* accepted last."""
    held = json.loads(ledger_state(state, "document") or "{}")
    return str(held.get("anneal", {}).get("signature", {}).get("key_id", ""))


def test_abandon_to_a_plane_refuses_bad_keys_and_shared_servers_and_adopt_names_heat_made_resources(
    tmp_path: Path,
) -> None:
    """`anneal stack abandon --to URL --to-key FILE` with a key that is no key is a 400 naming it, and with a server
    another stack shares a 409 naming the server, the stack staying; Heat's own abandon data is refused naming every
    resource Anneal cannot adopt."""
    a = start_control_plane(tmp_path)
    try:
        a.create_stack("kept", "heat_template_version: 2018-08-31\nresources: {n: {type: OS::Heat::None}}\n")
        bad = tmp_path / "bad-key.json"
        bad.write_text(json.dumps({"public_key": "AAAA", "adopt_key": "AAAA"}))
        run = a.cli("stack", "abandon", "kept", "--to", "http://127.0.0.1:1", "--to-key", str(bad))
        assert run.returncode != 0 and "to_key.public_key: expected a 32-byte key" in run.stderr
        lone = a.cli("stack", "abandon", "kept", "--to", "http://127.0.0.1:1")
        assert lone.returncode != 0 and "--to and --to-key go together" in lone.stderr
        assert a.api("GET", "/v1/stacks/kept").status == 200
        # A server that also runs another stack's deployment moves whole or not at all: 409 naming it.
        lonely = a.api("POST", "/v1/servers", {"name": "lonely"}).body["id"]
        for name in ("one", "two"):
            a.create_stack(name, SHARED)
        run = a.cli(
            "stack", "abandon", "one", "--to", a.url, "--to-key", str(_key_file(a, tmp_path / "k.json"))
        )
        assert run.returncode != 0 and f"server {lonely} also runs deployments of another stack" in run.stderr
        assert (
            a.api("GET", "/v1/stacks/one").status,
            a.api("GET", "/v1/servers/lonely").body["handed_over_to"],
        ) == (
            200,
            None,
        )
        heat_made = {
            "template": {"heat_template_version": "2018-08-31", "resources": HEAT_MADE},
            "resources": {n: {"name": n, "resource_id": n, "type": r["type"]} for n, r in HEAT_MADE.items()},
        }
        refused = a.api("POST", "/v1/adopt", {"name": "from-heat", "adopt_stack_data": heat_made})
        assert (refused.status, refused.body["error"]["where"]) == (400, "adopt_stack_data.resources")
        assert "box, cfg: not abandoned by Anneal" in refused.body["error"]["message"]
        assert a.api("GET", "/v1/stacks/from-heat").status == 404
    finally:
        stop_control_plane(a)


def test_a_group_of_nested_stacks_moves_to_another_plane_with_its_agents(
    planes: tuple[tuple[ControlPlane, str], tuple[ControlPlane, str]], tmp_path: Path
) -> None:
    """`anneal stack abandon --to` of a ResourceGroup of template resources, adopted on B: both members' agents
    (local ones A started) take B's key, nothing re-runs, the group's outputs read as before, an update on B
    runs UPDATE once on each."""
    (a, _), (b, _) = planes
    log, params = tmp_path / "runs.log", {"log": str(tmp_path / "runs.log")}
    a.create_stack("tree", NESTED_GROUP, params=params, files={"member.yaml": NESTED_MEMBER}, timeout=180)
    agents = [a.agent_dir(f"nest-{i}") for i in (0, 1)]
    b_key = json.loads(_key_file(b, tmp_path / "b-key.json").read_text())
    data_file = tmp_path / "tree.json"
    run = a.cli("stack", "abandon", "tree", "--to", b.url, "--to-key", str(tmp_path / "b-key.json"))
    assert run.returncode == 0, run.stderr
    data_file.write_text(run.stdout)
    adopted = b.cli("stack", "adopt", "tree", "--adopt-file", str(data_file), "-f", "json")
    assert adopted.returncode == 0, adopted.stderr
    wait_until(
        lambda: {_signer(s) for s in agents} == {b_key["key_id"]}, "an agent never accepted B's document"
    )
    assert sorted(_runs(log)) == ["0-CREATE-r1", "1-CREATE-r1"]
    assert b.outputs("tree")["said"] == ["0-r1", "1-r1"]
    assert 202 == b.api("PUT", "/v1/stacks/tree", {"existing": True, "parameters": {"rev": "r2"}}).status
    b.settled("tree", "UPDATE_COMPLETE", 180)
    assert sorted(_runs(log)) == ["0-CREATE-r1", "0-UPDATE-r2", "1-CREATE-r1", "1-UPDATE-r2"]
    assert b.outputs("tree")["said"] == ["0-r2", "1-r2"]
    b.delete_stack("tree")  # B deletes the tree it adopted, servers it did not start included
    assert [n for n in (s["name"] for s in b.api("GET", "/v1/stacks?nested=true").body) if "tree" in n] == []
