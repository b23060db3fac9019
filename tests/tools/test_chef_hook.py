"""The chef hook against a FAKE chef-client (tests/tools/fake_chef_client.py).

No Chef or Cinc client can be installed here (../shared/reference/env.md §4: not in Debian,
RubyGems and the omnibus downloads are out of reach), so a real Chef run is not exercised:
these tests check the command line, client.rb, the node JSON and how results are read.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.hookrun import deployment, pid_is_alive, run_hook

FAKE = Path(__file__).with_name("fake_chef_client.py")


@pytest.fixture
def client(tmp_path: Path) -> tuple[Path, Path]:
    """The fake client installed as ``<tmp>/bin/chef-client``, and the file it records to."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(FAKE, bindir / "chef-client")
    return bindir / "chef-client", tmp_path / "record.jsonl"


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_chef(
    tmp_path: Path, client: tuple[Path, Path], item: dict[str, Any], **env: str
) -> tuple[dict[str, Any], str]:
    path, record = client
    env = {"ANNEAL_CHEF_CLIENT": str(path), "FAKE_CHEF_RECORD": str(record), **env}
    return run_hook("chef", tmp_path / "w", item, **env)


def test_command_line_client_rb_and_node_json(tmp_path, client):
    """chef-client -z --config client.rb -j node.json; inputs are attributes, config the run list."""
    item = deployment(
        "chef",
        '["recipe[web::default]", "role[base]"]',
        inputs={"port": 8080, "environment": "prod", "deploy_signal_id": "http://secret"},
        options={"kitchen_path": str(tmp_path / "kitchen")},
    )
    result, _ = run_chef(tmp_path, client, item)
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    (run,) = records(client[1])
    argv = run["argv"]
    assert argv[0] == "-z" and argv[1] == "--config" and argv[3] == "-j"
    assert run["node"] == {"port": 8080, "run_list": ["recipe[web::default]", "role[base]"]}
    rb = run["client_rb"]
    assert "local_mode true\n" in rb
    assert f"cookbook_path ['{tmp_path / 'kitchen' / 'cookbooks'}']" in rb
    assert "environment 'prod'\n" in rb
    assert "Starting Chef Infra Client" in result["deploy_stdout"]
    assert list((tmp_path / "w" / "chef" / "working").glob("d1.*")) == []  # node JSON removed


def test_outputs_and_exit_status(tmp_path, client):
    """Outputs written to heat_outputs_path files come back; a non-zero exit is the status."""
    item = deployment(
        "chef", ["recipe[x]"], inputs={"fake_outputs": {"url": "http://x"}, "fake_exit": 1}, outputs=("url",)
    )
    result, _ = run_chef(tmp_path, client, item)
    assert (result["deploy_status_code"], result["url"]) == (1, "http://x")
    assert "Chef Infra Client failed" in result["deploy_stderr"]


def test_delete_config_runs(tmp_path, client):
    """A DELETE config runs the client too, with its own run list."""
    item = deployment("chef", ["recipe[web::remove]"], action="DELETE")
    result, _ = run_chef(tmp_path, client, item)
    assert result["deploy_status_code"] == 0
    assert records(client[1])[0]["node"]["run_list"] == ["recipe[web::remove]"]


def test_timeout_kills_the_client(tmp_path, client):
    """At the timeout the client is stopped: 124."""
    pidfile = tmp_path / "pid"
    item = deployment(
        "chef", [], inputs={"fake_sleep": 600, "fake_pidfile": str(pidfile)}, options={"timeout": 3}
    )
    result, _ = run_chef(tmp_path, client, item)
    assert result["deploy_status_code"] == 124
    assert not pid_is_alive(int(pidfile.read_text()))


def test_cinc_client_is_used_when_installed(tmp_path, client):
    """With no setting and no chef-client, cinc-client on PATH is run."""
    path, _ = client
    path.rename(path.with_name("cinc-client"))
    result, _ = run_chef(
        tmp_path, client, deployment("chef", []), ANNEAL_CHEF_CLIENT="", PATH=f"{path.parent}:/usr/bin:/bin"
    )
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert records(client[1])


def test_missing_client_is_a_failure_naming_it(tmp_path, client):
    """No chef-client nor cinc-client: FAILED (127) saying so."""
    result, _ = run_chef(tmp_path, client, deployment("chef", []), ANNEAL_CHEF_CLIENT="", PATH=str(tmp_path))
    assert result["deploy_status_code"] == 127
    assert "neither chef-client nor cinc-client" in result["deploy_stderr"]


@pytest.mark.parametrize("config", ['{"run_list": 1}', "not json", "[1, 2]"])
def test_bad_run_list_is_named(tmp_path, client, config):
    """A config that is not a run list fails with a message saying what a run list is."""
    result, _ = run_chef(tmp_path, client, deployment("chef", config))
    assert result["deploy_status_code"] == 1
    assert "run list" in result["deploy_stderr"]
