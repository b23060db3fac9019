"""Reads that stay cheap on a stack of a million, and documents kept out of memory (issue 20).

A real control plane (`anneal serve`) and real agents. Listings read a page at a time
(`GET /v1/deployments?limit=&after=`, `GET /v1/stacks/NAME/resources?limit=&after=`, `stack show`
with its first page of resources) give every row once and say where the next page starts. With
``--document-cache 1`` the control plane keeps the signed bytes of one server's document only:
the other agents' documents are rendered again from the database when fetched, and every
deployment still runs. The stack's progress counts answer on PostgreSQL too.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import enrol_agent, stop_agent
from tests.support.controlplane import ControlPlane, serve_once, start_control_plane, stop_control_plane
from tests.support.pg import Postgres
from tests.support.templates import script_per_server

SERVERS = ["b1", "b2", "b3"]
SCRIPT = '#!/bin/sh\nprintf \'ran %s\' "$what" > "$heat_outputs_path.said"\n'


def template() -> str:
    """Two deployments on each of SERVERS (six in all), each saying its input."""
    inputs = [{"what": f"{s}-{i}"} for s in SERVERS for i in range(2)]
    return script_per_server(SCRIPT, [s for s in SERVERS for _ in range(2)], inputs=inputs, output="said")


def run_stack(tmp_path: Path, *serve_args: str) -> tuple[ControlPlane, list[subprocess.Popen[bytes]]]:
    """A control plane with *serve_args*, an agent per server, and the stack created and complete."""
    cp = start_control_plane(tmp_path, "--provisioner", "enrol", *serve_args)
    agents: list[subprocess.Popen[bytes]] = []
    try:
        for name in SERVERS:
            argv = enrol_agent(cp, name, tmp_path / name)
            with open(tmp_path / f"{name}.log", "ab") as log:
                agents.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        cp.create_stack("big", template(), timeout=120)
    except BaseException:
        for agent in agents:
            stop_agent(agent)
        stop_control_plane(cp)
        raise
    return cp, agents


@pytest.fixture(scope="module")
def settled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One settled stack for the module's read-only tests."""
    cp, agents = run_stack(tmp_path_factory.mktemp("big"), "--document-cache", "1")
    yield cp
    for agent in agents:
        stop_agent(agent)
    stop_control_plane(cp)


def test_every_deployment_runs_when_the_publisher_keeps_one_servers_document(settled: ControlPlane) -> None:
    """--document-cache 1: three agents each get their documents (rendered again on fetch) and run them."""
    outputs = settled.outputs("big")
    assert {outputs[f"out{i}"] for i in range(6)} == {f"ran {s}-{i}" for s in SERVERS for i in range(2)}


def test_deployments_read_a_page_at_a_time_give_each_once(settled: ControlPlane) -> None:
    """limit=4 then after= the last id: the six deployments, each once, as the unpaged list has them."""
    every = settled.api("GET", "/v1/deployments?stack=big").body
    first = settled.api("GET", "/v1/deployments?stack=big&limit=4").body
    rest = settled.api("GET", f"/v1/deployments?stack=big&limit=4&after={first[-1]['id']}").body
    assert [d["id"] for d in first] == sorted(d["id"] for d in first) and len(first) == 4
    assert sorted(d["id"] for d in first + rest) == sorted(d["id"] for d in every) and len(every) == 6
    assert {d["server_name"] for d in first + rest} == set(SERVERS)


def test_stack_show_gives_the_first_page_of_resources_and_says_there_are_more(settled: ControlPlane) -> None:
    """stack show --resources-limit 2 prints two resources and the command that reads the next page."""
    done = settled.cli("stack", "show", "big", "--resources-limit", "2", "-f", "json")
    shown = json.loads(done.stdout)
    assert len(shown["resources"]) == 2 and shown["resources_more"] is True
    assert shown["status"] == "CREATE_COMPLETE"
    table = settled.cli("stack", "show", "big", "--resources-limit", "2")
    assert (
        f"more: anneal stack resources big --after {shown['resources'][-1]['id']} --limit 2" in table.stderr
    )


def test_stack_resources_paged_through_the_cli_list_every_resource_once(settled: ControlPlane) -> None:
    """stack resources --limit 3, following each printed next-page command, lists the seven resources once."""
    names: list[str] = []
    args = ["stack", "resources", "big", "--limit", "3"]
    for _ in range(10):  # bounded: 7 resources (the config, 6 deployments; the servers are enrolled ones)
        done = settled.cli(*args, "-f", "json")
        assert done.returncode == 0, done.stderr
        names += [r["name"] for r in json.loads(done.stdout)]
        if "more: " not in done.stderr:
            break
        args = done.stderr.split("more: anneal ", 1)[1].split()
    assert sorted(names) == ["cfg", *(f"dep{i}" for i in range(6))]


def test_a_bad_page_size_is_refused_naming_it(settled: ControlPlane) -> None:
    """limit=0 on each paged listing: 400 naming limit (or resources_limit); the CLI refuses --limit 0."""
    for path, where in (
        ("/v1/deployments?stack=big&limit=0", "limit"),
        ("/v1/stacks/big/resources?limit=x", "limit"),
        ("/v1/stacks/big?resources_limit=0", "resources_limit"),
        ("/v1/stacks/big/resources?limit=2&after=x", "after"),
    ):
        answer = settled.api("GET", path)
        assert answer.status == 400 and where in json.dumps(answer.body), (path, answer.body)
    done = settled.cli("deployment", "list", "--stack", "big", "--limit", "0")
    assert done.returncode == 1 and "--limit: at least 1" in done.stderr


def test_stack_show_counts_and_outputs_follow_an_update_on_postgresql(
    tmp_path: Path, postgres: Postgres
) -> None:
    """On PostgreSQL: the progress counts (a 500 once), no outputs, then after an update that adds
    one and a type, that output resolved and the graph's counts of the new type."""
    cp = start_control_plane(tmp_path, "--db", postgres.new_database())
    try:
        values = "".join(f"  v{i}: {{type: OS::Heat::Value, properties: {{value: {i}}}}}\n" for i in range(3))
        cp.create_stack("values", f"heat_template_version: rocky\nresources:\n{values}", timeout=60)
        progress = cp.api("GET", "/v1/stacks/values?summary=true&progress=true").body["progress"]
        assert progress["resources"] == 3 and progress["done"] == 3 and progress["in_progress"] == 0
        assert 3 == progress["total"] and [] == cp.api("GET", "/v1/stacks/values").body["outputs"]
        more = values + "  n: {type: OS::Heat::None, depends_on: v2}\n"
        output = "outputs:\n  two: {value: {get_attr: [v2, value]}}\n"
        cp.update_stack("values", f"heat_template_version: rocky\nresources:\n{more}{output}", timeout=60)
        shown = cp.api("GET", "/v1/stacks/values").body
        assert [("two", 2)] == [(o["output_key"], o["output_value"]) for o in shown["outputs"]]
        progress = cp.api("GET", "/v1/stacks/values?summary=true&progress=true").body["progress"]
        assert (progress["total"], progress["resources"], progress["done"]) == (4, 4, 4)
        graph = cp.api("GET", "/v1/stacks/values/graph").body
        assert {("n", "OS::Heat::None", "CREATE_COMPLETE")} == {
            (n["name"], n["type"], n["status"]) for n in graph["nodes"] if n["type"] == "OS::Heat::None"
        }
    finally:
        stop_control_plane(cp)


def test_events_read_newest_first_a_page_at_a_time(settled: ControlPlane) -> None:
    """newest=true&limit=5, then before= the last id: every event once, newest first; wait with it is a 400;
    the CLI's --newest prints the last events and the command for the page before."""
    every = [e["id"] for e in settled.api("GET", "/v1/stacks/big/events").body]
    pages: list[int] = []
    before = ""
    for _ in range(len(every) // 5 + 2):  # bounded: one more page than there can be
        page = settled.api("GET", f"/v1/stacks/big/events?newest=true&limit=5{before}").body
        if not page:
            break
        pages += [e["id"] for e in page]
        before = f"&before={page[-1]['id']}"
    assert len(every) > 10 and every[::-1] == pages
    answer = settled.api("GET", "/v1/stacks/big/events?newest=true&wait=2")
    assert answer.status == 400 and "wait" == answer.body["error"]["where"]
    done = settled.cli("stack", "events", "big", "--newest", "--limit", "3", "-f", "json")
    shown = [e["id"] for e in json.loads(done.stdout)]
    assert pages[:3] == shown
    assert f"more events: anneal stack events big --newest --before {shown[-1]} --limit 3" in done.stderr


def test_a_document_cache_below_one_is_refused_naming_it(tmp_path: Path) -> None:
    """anneal serve --document-cache 0 exits 2 naming the option (a cache of none would serve nothing)."""
    done = serve_once(tmp_path, "--document-cache", "0")
    assert done.returncode == 2 and "--document-cache: '0': expected a whole number, 1 or more" in done.stderr
