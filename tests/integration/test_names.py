"""One name grammar for stacks, servers and resources; names never become paths, routes or escape codes.

A name starts with a letter and has letters, digits, '_', '-' and '.' (Heat's stack-name
rule, at most 255); the API refuses any other with a 400 naming the field, the CLI quotes
every name it puts in a URL, the local provisioner keeps an agent's state under the
server's id, and the CLI escapes control characters before they reach the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.templates import one_script_deployment

BAD_NAMES = ["..", "prod-db?x", "a/b", "web\n", "\x1b[31mred", "1st", "", "x" * 256, "has space", "dé"]


@pytest.fixture
def enrol_cp(tmp_path: Path) -> Iterator[ControlPlane]:
    cp = start_control_plane(tmp_path, defaults=())
    yield cp
    stop_control_plane(cp)


def test_names_outside_the_grammar_are_refused_naming_the_field(enrol_cp: ControlPlane) -> None:
    """Stacks and servers named '..', 'a/b', 'web\\n' (a trailing newline too), ... get a 400 at `name`."""
    cp = enrol_cp
    template = "heat_template_version: 2018-08-31\nresources: {}\n"
    for name in BAD_NAMES:
        for path, body in (
            ("/v1/stacks", {"name": name, "template": template}),
            ("/v1/servers", {"name": name}),
        ):
            resp = cp.api("POST", path, body)
            assert (400, "name") == (resp.status, resp.body["error"]["where"]), (path, name, resp.body)
            assert "starts with a letter" in resp.body["error"]["message"]
    assert [] == cp.api("GET", "/v1/stacks").body
    assert [] == cp.api("GET", "/v1/servers").body
    for name in ("web", "prod-db", "a.b_c-1", "W" * 255):
        assert 201 == cp.api("POST", "/v1/servers", {"name": name}).status, name


def test_the_cli_quotes_a_name_so_it_reaches_no_other_server(enrol_cp: ControlPlane) -> None:
    """`server transport 'prod-db?x' LOCAL` is about a server of that name (none), not prod-db."""
    cp = enrol_cp
    assert 201 == cp.api("POST", "/v1/servers", {"name": "prod-db"}).status
    for argv in (
        ("server", "transport", "prod-db?x", "LOCAL"),
        ("server", "transport", "prod-db#x", "LOCAL"),
        ("server", "token", "prod-db/../prod-db"),
        ("server", "show", ".."),
    ):
        done = cp.cli(*argv)
        assert 1 == done.returncode, (argv, done.stdout, done.stderr)
        assert "not found" in done.stderr and "HTTP 404" in done.stderr, (argv, done.stderr)
    assert "HTTP" == cp.api("GET", "/v1/servers/prod-db").body["transport"]
    assert "AWAITING_ENROLMENT" == cp.api("GET", "/v1/servers/prod-db").body["status"]


def test_template_server_and_resource_names_follow_the_grammar(enrol_cp: ControlPlane) -> None:
    """A DeployedServer named '..' (literally or by parameter) or a resource named 'a\\nb' is a 400 naming it."""
    cp = enrol_cp
    literal = "heat_template_version: 2018-08-31\nresources:\n  box: {type: OS::Heat::DeployedServer, properties: {name: ..}}\n"
    by_param = (
        "heat_template_version: 2018-08-31\nparameters: {n: {type: string}}\n"
        "resources:\n  box: {type: OS::Nova::Server, properties: {name: {get_param: n}}}\n"
    )
    newline = json.dumps(
        {"heat_template_version": "2018-08-31", "resources": {"a\nb": {"type": "OS::Heat::None"}}}
    )
    for case, text, params, where in (
        ("literal", literal, {}, "resources.box.properties.name"),
        ("param", by_param, {"n": "../../etc"}, "resources.box.properties.name"),
        ("resource", newline, {}, "resources"),
    ):
        resp = cp.create(case, text, params=params)
        assert (400, where) == (resp.status, resp.body["error"]["where"]), (case, resp.body)
        assert "\n" not in resp.body["error"]["message"], case
    assert [] == cp.api("GET", "/v1/servers").body
    cp.create_stack("param", by_param, params={"n": "db-1"})
    assert ["db-1"] == [s["name"] for s in cp.api("GET", "/v1/servers").body]


def test_local_agents_keep_their_state_under_the_server_id(control_plane: ControlPlane) -> None:
    """Under the local provisioner an agent's state dir is agents/<server id>, never its name."""
    cp = control_plane
    cp.create_stack("ids", one_script_deployment("#!/bin/sh\necho hi\n", server_name="box-1"))
    server = cp.api("GET", "/v1/servers/box-1").body
    assert [server["id"]] == [p.name for p in (cp.data_dir / "agents").iterdir()]
    assert (cp.data_dir / "agents" / server["id"] / "agent.log").is_file()


def test_the_cli_escapes_what_a_hook_prints_before_the_terminal_sees_it(control_plane: ControlPlane) -> None:
    """Escape codes a hook prints (clear screen, retitle) reach `deployment show`/`log` as \\x1b text."""
    cp = control_plane
    script = "#!/bin/sh\nprintf 'before\\033[2J\\033]0;owned\\007after\\n'\n"
    cp.create_stack("esc", one_script_deployment(script))
    dep_id = cp.api("GET", "/v1/deployments?stack=esc").body[0]["id"]
    assert "\x1b[2J" in cp.api("GET", f"/v1/deployments/{dep_id}").body["deploy_stdout"]
    for argv in (("deployment", "show", dep_id), ("deployment", "log", dep_id)):
        done = cp.cli(*argv)
        assert 0 == done.returncode, (argv, done.stderr)
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout, argv
        assert "before\\x1b[2J\\x1b]0;owned\\x07after" in done.stdout, (argv, done.stdout)
