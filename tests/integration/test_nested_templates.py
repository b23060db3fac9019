"""Template resources three levels deep: parameters in, outputs out, a deployment at each level.

The templates sit in a directory tree as an author keeps them (the middle one names the
leaf relative to itself, the leaf's script is a get_file beside it); the CLI gathers them.
Each deployment appends "<level> <action> <rev>" to one log, so what ran, and in which
order, is read from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane

TOP = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  leaf_rev: {type: string, default: r1}
  mid_rev: {type: string, default: r1}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: {list_join: ['-', [{get_param: 'OS::stack_name'}, box]]}}}
  step:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: LEVEL}, {name: REV}, {name: LOG}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        echo "$LEVEL $deploy_action $REV" >> "$LOG"
        printf '%s' "$LEVEL-$REV" > "$heat_outputs_path.said"
  top_dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: step}
      server: {get_resource: box}
      actions: [CREATE, UPDATE, DELETE]
      input_values: {LEVEL: top, REV: r1, LOG: {get_param: log}}
  mid:
    type: nested/mid.yaml
    metadata: {role: middle}
    properties:
      server: {get_resource: box}
      config: {get_resource: step}
      log: {get_param: log}
      rev: {get_param: mid_rev}
      leaf_rev: {get_param: leaf_rev}
      from_above: {get_attr: [top_dep, said]}
outputs:
  chain: {value: {get_attr: [mid, chain]}}
  leaf_said: {value: {get_attr: [mid, resource.leaf.said]}}
  mid_stdout: {value: {get_attr: [mid, resource.mid_dep.deploy_stdout]}}
  mid_id: {value: {get_attr: [mid, OS::stack_id]}}
  mid_facade: {value: {get_attr: [mid, facade]}}
"""

MID = """
heat_template_version: 2018-08-31
parameters:
  server: {type: string}
  config: {type: string}
  log: {type: string}
  rev: {type: string}
  leaf_rev: {type: string}
  from_above: {type: string}
resources:
  mid_dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_param: config}
      server: {get_param: server}
      actions: [CREATE, UPDATE, DELETE]
      input_values: {LEVEL: mid, REV: {get_param: rev}, LOG: {get_param: log}}
  leaf:
    type: leaf.yaml
    properties:
      server: {get_param: server}
      log: {get_param: log}
      rev: {get_param: leaf_rev}
      role: {get_attr: [mid_dep, said]}
outputs:
  chain:
    value: {list_join: [' > ', [{get_param: from_above}, {get_attr: [mid_dep, said]}, {get_attr: [leaf, said]}]]}
  facade: {value: {resource_facade: metadata}}
"""

LEAF = """
heat_template_version: 2018-08-31
parameters:
  server: {type: string}
  log: {type: string}
  rev: {type: string}
  role: {type: string}
resources:
  leaf_cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: REV}, {name: LOG}, {name: ROLE}, {name: FACADE}, {name: NAME}]
      outputs: [{name: said}]
      config: {get_file: leaf.sh}
  leaf_dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: leaf_cfg}
      server: {get_param: server}
      actions: [CREATE, UPDATE, DELETE]
      input_values:
        REV: {get_param: rev}
        LOG: {get_param: log}
        ROLE: {get_param: role}
        FACADE: {get_param: OS::stack_id}
        NAME: {get_param: OS::stack_name}
outputs:
  said: {value: {get_attr: [leaf_dep, said]}}
"""

LEAF_SH = """#!/bin/sh
echo "leaf $deploy_action $REV" >> "$LOG"
printf '%s' "leaf-$REV-after-$ROLE" > "$heat_outputs_path.said"
"""


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("nested"))
    yield plane
    stop_control_plane(plane)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The templates as an author lays them out: top.yaml, nested/mid.yaml, nested/leaf.yaml + leaf.sh."""
    (tmp_path / "nested").mkdir()
    (tmp_path / "top.yaml").write_text(TOP)
    (tmp_path / "nested" / "mid.yaml").write_text(MID)
    (tmp_path / "nested" / "leaf.yaml").write_text(LEAF)
    (tmp_path / "nested" / "leaf.sh").write_text(LEAF_SH)
    return tmp_path


def _cli_ok(cp: ControlPlane, *args: str) -> str:
    done = cp.cli(*args)
    assert 0 == done.returncode, done.stdout + done.stderr
    return done.stdout


def test_three_levels_create_update_and_delete_depth_first(cp: ControlPlane, tree: Path) -> None:
    """Parameters go down, outputs come up; an update re-runs only the leaf; delete runs leaf, mid, top."""
    log = tree / "runs.log"
    top = str(tree / "top.yaml")
    _cli_ok(cp, "stack", "create", "deep", "-t", top, "-P", f"log={log}", "--wait", "--timeout", "180")
    assert ["top CREATE r1", "mid CREATE r1", "leaf CREATE r1"] == _lines(log)
    out = cp.outputs("deep")
    assert "top-r1 > mid-r1 > leaf-r1-after-mid-r1" == out["chain"]
    assert "leaf-r1-after-mid-r1" == out["leaf_said"]
    assert "" == out["mid_stdout"]
    assert {"role": "middle"} == out["mid_facade"]
    nested = {s["name"]: s for s in cp.api("GET", "/v1/stacks?nested=true").body}
    mid = next(s for s in nested.values() if s["parent_resource"] == "mid")
    leaf = next(s for s in nested.values() if s["parent_resource"] == "leaf")
    assert (mid["id"], 1) == (out["mid_id"], mid["nested_depth"])
    assert (mid["id"], 2) == (leaf["parent"], leaf["nested_depth"])
    assert "deep" not in {s["name"] for s in nested.values() if s["parent"]}
    assert not any(s["parent"] for s in cp.api("GET", "/v1/stacks").body)  # top-level only by default
    listed = {s["name"]: s for s in json.loads(_cli_ok(cp, "stack", "list", "--nested", "-f", "json"))}
    assert {mid["name"], leaf["name"], "deep"} <= set(listed)
    assert listed[leaf["name"]]["parent"] == mid["id"]
    top_only = {s["name"] for s in json.loads(_cli_ok(cp, "stack", "list", "-f", "json"))}
    assert "deep" in top_only and not {mid["name"], leaf["name"]} & top_only

    _cli_ok(cp, "stack", "update", "deep", "-t", top, "-P", f"log={log}", "-P", "leaf_rev=r2", "--wait")
    assert ["leaf UPDATE r2"] == _lines(log)[3:]  # top's and mid's deployments did not run again
    assert "top-r1 > mid-r1 > leaf-r2-after-mid-r1" == cp.outputs("deep")["chain"]

    events = cp.api("GET", "/v1/stacks/deep/events?nested_depth=2").body
    assert {"deep", mid["name"], leaf["name"]} == {e["stack_name"] for e in events}
    assert any(e["resource_name"] == "leaf_dep" and e["action"] == "UPDATE" for e in events)
    assert not any(e["stack_name"] != "deep" for e in cp.api("GET", "/v1/stacks/deep/events").body)
    resources = _cli_ok(cp, "stack", "resources", "deep", "--nested-depth", "2", "-f", "json")
    assert {"box", "step", "top_dep", "mid", "mid_dep", "leaf", "leaf_cfg", "leaf_dep"} <= set(
        resources.replace('"', " ").split()
    )

    _cli_ok(cp, "stack", "delete", "deep", "--wait")
    assert ["leaf DELETE r2", "mid DELETE r1", "top DELETE r1"] == _lines(log)[4:]
    assert not [s for s in cp.api("GET", "/v1/stacks?nested=true").body if s["name"].startswith("deep-")]
    gone = cp.api("GET", "/v1/stacks/deep/events?nested_depth=2").body
    assert {"deep", mid["name"], leaf["name"]} == {e["stack_name"] for e in gone}
    # Every level's events before the delete are still found (through the last event of each
    # deleted stack, which alone keeps its name and parent), each under its own stack's name.
    named = {e["id"]: e["stack_name"] for e in gone}
    assert {e["id"]: e["stack_name"] for e in events}.items() <= named.items()


def test_a_nested_stack_is_changed_through_its_parent_only(cp: ControlPlane, tree: Path) -> None:
    """Updating or deleting a nested stack directly answers 409 naming its parent."""
    log = tree / "runs.log"
    _cli_ok(cp, "stack", "create", "direct", "-t", str(tree / "top.yaml"), "-P", f"log={log}", "--wait")
    child = next(s for s in cp.api("GET", "/v1/stacks?nested=true").body if s["parent_resource"] == "mid")
    resp = cp.api("DELETE", f"/v1/stacks/{child['name']}")
    assert 409 == resp.status and "change the parent stack" in resp.body["error"]["message"]
    cp.delete_stack("direct")


def test_a_template_that_nests_itself_is_refused_at_the_depth_cap(cp: ControlPlane) -> None:
    """A template resource of its own template is refused at create, naming the depth limit."""
    loop = "heat_template_version: 2018-08-31\nresources:\n  again: {type: loop.yaml}\n"
    resp = cp.create("loop", loop, files={"loop.yaml": loop})
    assert 400 == resp.status, resp.body
    error = resp.body["error"]
    assert "resources.again.type" in error["message"] and "more than the limit of 5" in error["message"]
    assert "--max-nested-depth" in error["message"]


FAILING_LEAF_SH = """#!/bin/sh
echo "leaf $deploy_action $REV" >> "$LOG"
[ "$REV" = bad ] && [ "$deploy_action" != DELETE ] && { echo "leaf refuses $REV" >&2; exit 4; }
printf '%s' "leaf-$REV-after-$ROLE" > "$heat_outputs_path.said"
"""


def test_a_nested_failure_rolls_the_whole_tree_back(cp: ControlPlane, tree: Path) -> None:
    """A leaf deployment that fails an update with --rollback takes every level back to the previous values."""
    (tree / "nested" / "leaf.sh").write_text(FAILING_LEAF_SH)
    log, top = tree / "runs.log", str(tree / "top.yaml")
    _cli_ok(cp, "stack", "create", "back", "-t", top, "-P", f"log={log}", "--wait")
    done = cp.cli(
        "stack",
        "update",
        "back",
        "-t",
        top,
        "-P",
        f"log={log}",
        "-P",
        "leaf_rev=bad",
        "-P",
        "mid_rev=r2",
        "--rollback",
        "--wait",
    )
    assert "ROLLBACK_COMPLETE" in done.stdout, done.stdout
    # The reason names the path down to the deployment that failed.
    assert "mid: nested stack back-mid-" in done.stdout and "leaf_dep: Deployment exited" in done.stdout
    # The failed leaf deployment is replaced (as at the top level): the new one runs CREATE, the old DELETE.
    rolled = ["mid UPDATE r2", "leaf UPDATE bad", "mid UPDATE r1", "leaf CREATE r1", "leaf DELETE bad"]
    assert rolled == _lines(log)[3:]
    assert "top-r1 > mid-r1 > leaf-r1-after-mid-r1" == cp.outputs("back")["chain"]
    cp.delete_stack("back")


def test_a_changed_nested_template_updates_its_stack_with_the_same_properties(
    cp: ControlPlane, tree: Path
) -> None:
    """Editing only the leaf's script (no property changes) re-runs only the leaf, with the new script."""
    log, top = tree / "runs.log", str(tree / "top.yaml")
    _cli_ok(cp, "stack", "create", "edited", "-t", top, "-P", f"log={log}", "--wait")
    (tree / "nested" / "leaf.sh").write_text(LEAF_SH.replace("leaf $deploy_action", "leaf v2 $deploy_action"))
    _cli_ok(cp, "stack", "update", "edited", "-t", top, "-P", f"log={log}", "--wait")
    assert ["leaf v2 UPDATE r1"] == _lines(log)[3:]
    _cli_ok(cp, "stack", "suspend", "edited", "--wait")
    states = {
        r["name"]: r["status"] for r in cp.api("GET", "/v1/stacks/edited/resources?nested_depth=2").body
    }
    assert "SUSPEND_COMPLETE" == states["leaf_dep"] == states["mid"]
    _cli_ok(cp, "stack", "resume", "edited", "--wait")
    cp.delete_stack("edited")


def test_a_nested_failure_is_shown_at_the_top_with_its_output(cp: ControlPlane, tree: Path) -> None:
    """A deployment failing two levels down fails the stack; `--wait` prints its path and its stderr."""
    (tree / "nested" / "leaf.sh").write_text(FAILING_LEAF_SH)
    log, top = tree / "runs.log", str(tree / "top.yaml")
    done = cp.cli("stack", "create", "broken", "-t", top, "-P", f"log={log}", "-P", "leaf_rev=bad", "--wait")
    assert 1 == done.returncode, done.stdout
    assert "CREATE_FAILED" in done.stdout
    assert "mid/leaf/leaf_dep:" in done.stdout and "leaf refuses bad" in done.stdout, done.stdout
    cp.delete_stack("broken")


BLUE_GREEN = """
heat_template_version: 2018-08-31
parameters:
  server: {type: string}
  log: {type: string}
  ver: {type: string}
  nap: {type: number}
  limit: {type: number}
resources:
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: VER, replace_on_change: true}, {name: LOG}]
      config: |
        #!/bin/sh
        echo "$deploy_resource_name $deploy_action $VER" >> "$LOG"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_param: server}
      actions: [CREATE, UPDATE, DELETE]
      input_values: {VER: {get_param: ver}, LOG: {get_param: log}}
  grp:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: cfg}
      servers: {member: {get_param: server}}
      input_values: {VER: group, LOG: {get_param: log}}
  nap_cfg:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: NAP}], config: "#!/bin/sh\\nsleep $NAP\\n"}
  slow:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: nap_cfg}
      server: {get_param: server}
      timeout: {get_param: limit}
      input_values: {NAP: {get_param: nap}}
"""

BLUE_GREEN_TOP = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  ver: {type: string}
  nap: {type: number, default: 0}
  limit: {type: number, default: 120}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: bg-box}}
  inner:
    type: bg.yaml
    properties:
      server: {get_resource: box}
      log: {get_param: log}
      ver: {get_param: ver}
      nap: {get_param: nap}
      limit: {get_param: limit}
"""


def test_nested_deployments_behave_as_top_level_ones(cp: ControlPlane, tmp_path: Path) -> None:
    """In a nested stack: a replace_on_change input replaces blue/green (new CREATE before old
    DELETE), a deployment group runs its member, and a deployment past its timeout fails the top."""
    (tmp_path / "bg.yaml").write_text(BLUE_GREEN)
    (tmp_path / "top.yaml").write_text(BLUE_GREEN_TOP)
    log, top = tmp_path / "runs.log", str(tmp_path / "top.yaml")
    _cli_ok(cp, "stack", "create", "bluegreen", "-t", top, "-P", f"log={log}", "-P", "ver=v1", "--wait")
    assert ["dep CREATE v1", "member CREATE group"] == sorted(_lines(log))
    _cli_ok(cp, "stack", "update", "bluegreen", "-t", top, "-P", f"log={log}", "-P", "ver=v2", "--wait")
    assert ["dep CREATE v2", "dep DELETE v1"] == _lines(log)[2:]
    done = cp.cli(
        "stack",
        "update",
        "bluegreen",
        "-t",
        top,
        "-P",
        f"log={log}",
        "-P",
        "ver=v2",
        "-P",
        "nap=60",
        "-P",
        "limit=3",  # only here: a 3 s limit at create would race the new agent's start on a loaded machine
        "--wait",
    )
    assert 1 == done.returncode, done.stdout
    # Whichever notices first: the control plane ("inner/slow: timed out after 3 s") or the agent,
    # which stops the hook at the same limit ("inner/slow: ... status code: 124 ... timed out after 3 s").
    assert "inner/slow: " in done.stdout and "timed out after 3 s" in done.stdout, done.stdout
    cp.delete_stack("bluegreen")
