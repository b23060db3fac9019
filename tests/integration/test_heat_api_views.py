"""Heat's API views: the real openstack CLI lists resources and events nested_depth levels down, previews a
create (`stack create --dry-run`) and exports a stack.

The tree is two levels deep with no servers (random strings), so it settles in seconds: the top stack has a
template resource ``mid`` (which has a template resource ``leaf``) and a ResourceGroup ``pair`` (its members
live in a nested stack, as Heat's do).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import OpenStack, heat_request, start_heat_plane, write_template

TOP = """
heat_template_version: 2018-08-31
resources:
  top_rand: {type: OS::Heat::RandomString, properties: {length: 8}}
  mid: {type: mid.yaml}
  pair:
    type: OS::Heat::ResourceGroup
    properties: {count: 2, resource_def: {type: OS::Heat::RandomString, properties: {length: 4}}}
outputs:
  leaf_value: {value: {get_attr: [mid, leaf_value]}}
"""
MID = """
heat_template_version: 2018-08-31
resources:
  mid_rand: {type: OS::Heat::RandomString, properties: {length: 8}}
  leaf: {type: leaf.yaml}
outputs:
  leaf_value: {value: {get_attr: [leaf, value]}}
"""
LEAF = """
heat_template_version: 2018-08-31
resources:
  leaf_rand: {type: OS::Heat::RandomString, properties: {length: 8}}
outputs:
  value: {value: {get_attr: [leaf_rand, value]}}
"""
PREVIEW = """
heat_template_version: 2018-08-31
description: two strings
parameters:
  size: {type: number, default: 4}
  secret: {type: string, hidden: true, default: hunter2}
resources:
  first: {type: OS::Heat::RandomString, properties: {length: {get_param: size}}}
  second: {type: OS::Heat::RandomString, properties: {length: 3}, depends_on: first}
  third:
    type: OS::Heat::Value
    properties:
      value:
        ref: {get_resource: first}
        made: {get_attr: [first, value]}
        sealed: {list_join: ["-", [{get_param: secret}, x]]}
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """One control plane with the Heat listener for this module, and the Heat API's root URL."""
    cp, url = start_heat_plane(tmp_path_factory.mktemp("heat-nested"))
    yield cp, url
    stop_control_plane(cp)


@pytest.fixture(scope="module")
def osc(plane: tuple[ControlPlane, str]) -> OpenStack:
    """The real openstack CLI pointed at the Heat endpoint with the admin token."""
    return OpenStack(plane[0], f"{plane[1]}/v1/ops-team")


@pytest.fixture(scope="module")
def tree(osc: OpenStack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The stack `tree` created with `stack create --wait` (the CLI gathers mid.yaml and leaf.yaml); its show."""
    work = tmp_path_factory.mktemp("templates")
    write_template(work, "mid.yaml", MID)
    write_template(work, "leaf.yaml", LEAF)
    osc.ok("stack", "create", "-t", write_template(work, "top.yaml", TOP), "--wait", "tree")
    shown = osc.json("stack", "show", "tree")
    assert shown["stack_status"] == "CREATE_COMPLETE", shown
    return dict(shown)


@pytest.fixture(scope="module")
def stacks(osc: OpenStack, tree: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The stacks `stack list --nested` shows once `tree` is made, by name."""
    return {s["Stack Name"]: s for s in osc.json("stack", "list", "--nested")}


def test_resource_list_nested_depth_shows_each_level_with_its_stack(
    osc: OpenStack, stacks: dict[str, dict[str, Any]]
) -> None:
    """`stack resource list --nested-depth 2` lists the nested stacks' resources after the resource that made
    them, each with its own stack's name; depth 1 stops above the leaf, no depth lists the top only."""
    mid = next(n for n in stacks if n.startswith("tree-mid-") and "-leaf-" not in n)
    leaf = next(n for n in stacks if n.startswith(f"{mid}-leaf-"))
    pair = next(n for n in stacks if n.startswith("tree-pair-"))
    rows = osc.json("stack", "resource", "list", "--nested-depth", "2", "tree")
    seen = [(r["resource_name"], r["stack_name"]) for r in rows]
    assert sorted(seen) == sorted(
        [("top_rand", "tree"), ("mid", "tree"), ("mid_rand", mid), ("leaf", mid), ("leaf_rand", leaf),
         ("pair", "tree"), ("0", pair), ("1", pair)]
    )  # fmt: skip
    assert seen.index(("leaf", mid)) + 1 == seen.index(
        ("leaf_rand", leaf)
    )  # Heat's order: made-by, then its own
    assert all(r["resource_status"] == "CREATE_COMPLETE" for r in rows)
    one = {r["resource_name"] for r in osc.json("stack", "resource", "list", "--nested-depth", "1", "tree")}
    assert "mid_rand" in one and "0" in one and "leaf_rand" not in one
    top = {r["resource_name"] for r in osc.json("stack", "resource", "list", "tree")}
    assert top == {"top_rand", "mid", "pair"}


def test_event_list_nested_depth_is_walked_by_the_server(
    osc: OpenStack, plane: tuple[ControlPlane, str], tree: dict[str, Any], stacks: dict[str, dict[str, Any]]
) -> None:
    """`stack event list --nested-depth 2` prints the leaf's events too (and export nests the stacks as abandon
    does) (`-f json`: under the leaf stack's name); the API itself
    answers nested_depth (every event has a root_stack link, the nested ones a stack link to their own stack)."""
    out = osc.ok("stack", "event", "list", "--nested-depth", "2", "tree")
    leaf = next(n for n in stacks if "-leaf-" in n)
    # heatclient names a nested resource by the resource that made its stack, as against Heat
    assert "[leaf.leaf_rand]: CREATE_COMPLETE" in out and "[mid.leaf]: CREATE_COMPLETE" in out, out
    assert f"[{leaf}]: CREATE_COMPLETE  Stack CREATE completed successfully" in out
    rows = osc.json("stack", "event", "list", "--nested-depth", "2", "tree")
    assert ("leaf_rand", leaf) in {(e["resource_name"], e["stack_name"]) for e in rows}
    status, body = heat_request(plane[0], plane[1], "GET", f"/stacks/tree/{tree['id']}/events?nested_depth=1")
    assert status == 200
    names = {e["resource_name"] for e in body["events"]}
    assert {"mid_rand", "leaf", "0", "1"} <= names and "leaf_rand" not in names
    assert all(
        any(x["rel"] == "root_stack" and tree["id"] in x["href"] for x in e["links"]) for e in body["events"]
    )
    mid_event = next(e for e in body["events"] if e["resource_name"] == "mid_rand")
    stack_link = next(x["href"] for x in mid_event["links"] if x["rel"] == "stack")
    assert "/stacks/tree-mid-" in stack_link
    status, exported = heat_request(plane[0], plane[1], "GET", f"/stacks/tree/{tree['id']}/export")
    assert status == 200 and {"mid_rand", "leaf"} <= set(exported["resources"]["mid"]["resources"])
    status, flat = heat_request(plane[0], plane[1], "GET", f"/stacks/tree/{tree['id']}/events")
    assert {e["resource_name"] for e in flat["events"]} <= {"tree", "top_rand", "mid", "pair"}
    assert not any(x["rel"] == "root_stack" for e in flat["events"] for x in e["links"])


def test_nested_stacks_name_their_parent_and_resources_link_them(
    osc: OpenStack, tree: dict[str, Any], stacks: dict[str, dict[str, Any]]
) -> None:
    """`stack list --nested` shows each nested stack's parent; `stack show` of one has `parent`; the resource that
    made it has a `nested` link to it, and a resource inside has `parent_resource`."""
    mid = next(n for n in stacks if n.startswith("tree-mid-") and "-leaf-" not in n)
    assert stacks[mid]["Parent"] == tree["id"]
    assert stacks["tree"]["Parent"] is None
    leaf = next(n for n in stacks if n.startswith(f"{mid}-leaf-"))
    assert osc.json("stack", "show", leaf)["parent"] == stacks[mid]["ID"]
    made = osc.json("stack", "resource", "show", "tree", "mid")
    nested = [x["href"] for x in made["links"] if x["rel"] == "nested"]
    assert nested and nested[0].endswith(f"/stacks/{mid}/{stacks[mid]['ID']}")
    assert made["physical_resource_id"] == stacks[mid]["ID"]
    inner = osc.json("stack", "resource", "show", mid, "leaf")
    assert inner["parent_resource"] == "mid"
    plain = osc.json("stack", "resource", "show", "tree", "top_rand")
    assert not [x for x in plain["links"] if x["rel"] == "nested"] and "parent_resource" not in plain


def test_create_dry_run_previews_the_stack_and_makes_nothing(
    osc: OpenStack, tree: dict[str, Any], tmp_path: Path
) -> None:
    """`stack create --dry-run` prints Heat's preview (parameters, each resource with its type and properties
    resolved as Heat resolves them before anything exists, id None) and makes no stack; a bad template is refused
    naming its path, a name in use with a conflict."""
    template = write_template(tmp_path, "preview.yaml", PREVIEW)
    shown = osc.json("stack", "create", "--dry-run", "-t", template, "--parameter", "size=6", "sketch")
    assert shown["stack_name"] == "sketch" and shown["id"] == "None"
    assert shown["parameters"]["size"] == "6" and shown["parameters"]["secret"] == "******"
    resources = {r["resource_name"]: r for r in shown["resources"]}
    assert set(resources) == {"first", "second", "third"}
    assert resources["first"]["resource_type"] == "OS::Heat::RandomString"
    assert resources["first"]["properties"] == {"length": 6}
    # a reference is the resource's name, an attribute null, a value derived from a hidden parameter masked
    made = {"ref": "first", "made": None, "sealed": "******"}
    assert resources["third"]["properties"]["value"] == made
    assert sorted(resources["first"]["required_by"]) == ["second", "third"]
    assert resources["second"]["resource_action"] == "INIT"
    assert "sketch" not in [s["Stack Name"] for s in osc.json("stack", "list")]
    bad = write_template(tmp_path, "bad.yaml", PREVIEW.replace("get_param: size", "get_param: nope"))
    refused = osc.run("stack", "create", "--dry-run", "-t", bad, "sketch")
    assert refused.returncode != 0 and "nope" in refused.stderr, refused.stderr
    taken = osc.run("stack", "create", "--dry-run", "-t", template, "tree")
    assert taken.returncode != 0 and "already exists" in taken.stderr, taken.stderr


def test_export_gives_the_abandon_data_and_keeps_the_stack(osc: OpenStack, tmp_path: Path) -> None:
    """`stack export` prints the stack's abandon data (template, resources with their ids) and the stack stays,
    unchanged; snapshots are refused with the reason."""
    template = write_template(tmp_path, "flat.yaml", PREVIEW)
    osc.ok("stack", "create", "-t", template, "--parameter", "secret=given-s3cret", "--wait", "flat")
    before = osc.json("stack", "resource", "list", "flat")
    out = tmp_path / "export.json"
    osc.ok("stack", "export", "--output-file", str(out), "flat")
    data = json.loads(out.read_text())
    assert (
        data["name"] == "flat" and data["template"]["resources"]["first"]["type"] == "OS::Heat::RandomString"
    )
    assert {n: r["resource_id"] for n, r in data["resources"].items()} == {
        r["resource_name"]: r["physical_resource_id"] for r in before
    }
    # sealed, as in abandon data
    assert "secret" in data["parameters"] and "given-s3cret" not in out.read_text()
    assert osc.json("stack", "show", "flat")["stack_status"] == "CREATE_COMPLETE"
    assert osc.json("stack", "resource", "list", "flat") == before
    refused = osc.run("stack", "snapshot", "create", "flat")
    assert refused.returncode != 0 and "snapshots are not supported" in refused.stderr, refused.stderr
    listed = osc.run("stack", "snapshot", "list", "flat")
    assert listed.returncode != 0 and "nothing of its servers" in listed.stderr, listed.stderr
