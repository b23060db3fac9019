"""The puppet hook against Debian's real puppet: facts, hiera, options, detailed exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.hookrun import TOOL_PATHS, deployment, pid_is_alive, require, run_hook


@pytest.fixture(scope="module", autouse=True)
def puppet_installed():
    require(TOOL_PATHS["ANNEAL_PUPPET"])


def test_inputs_are_facts_and_outputs_come_back(tmp_path):
    """Inputs reach the manifest as facts; an output file written by puppet is returned."""
    out = tmp_path / "out.txt"
    manifest = f"""
file {{ '{out}': content => "role=${{facts['role']}} action=${{::deploy_action}}" }}
file {{ "${{facts['heat_outputs_path']}}.result": content => "done-${{facts['role']}}" }}
"""
    item = deployment("puppet", manifest, inputs={"role": "web"}, outputs=("result",))
    result, _ = run_hook("puppet", tmp_path / "w", item)
    assert (result["deploy_status_code"], result["result"]) == (0, "done-web")
    assert out.read_text() == "role=web action=CREATE"
    assert "Applied catalog" in result["deploy_stdout"]


def test_hiera_data_from_inputs(tmp_path):
    """With enable_hiera the inputs are hiera data for lookup(); the data file is removed after."""
    out = tmp_path / "out.txt"
    manifest = f"file {{ '{out}': content => lookup('port') }}"
    item = deployment("puppet", manifest, inputs={"port": "8080"}, options={"enable_hiera": True})
    result, _ = run_hook("puppet", tmp_path / "w", item)
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert out.read_text() == "8080"
    assert not list((tmp_path / "w").rglob("heat_config.json"))


def test_tags_option_limits_what_is_applied(tmp_path):
    """options.tags reaches puppet: only the tagged resource is applied."""
    a, b = tmp_path / "a", tmp_path / "b"
    manifest = f"file {{ '{a}': content => 'a', tag => ['first'] }}\nfile {{ '{b}': content => 'b' }}\n"
    item = deployment("puppet", manifest, options={"tags": ["first"], "verbose": True})
    result, _ = run_hook("puppet", tmp_path / "w", item)
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert (a.exists(), b.exists()) == (True, False)


@pytest.mark.parametrize(
    ("manifest", "status"),
    [
        ("exec { 'boom': command => '/bin/false' }", 4),
        ("file { 'broken'", 1),
    ],
    ids=["failed-resource-4", "parse-error-1"],
)
def test_failures_keep_puppets_exit_code(tmp_path, manifest, status):
    """--detailed-exitcodes 4 (failures) and 1 (error) are the deployment's status, not success."""
    result, _ = run_hook("puppet", tmp_path / "w", deployment("puppet", manifest))
    assert result["deploy_status_code"] == status


def test_changes_and_failures_together_are_6(tmp_path):
    """A run that changed something and failed something reports 6."""
    manifest = f"file {{ '{tmp_path / 'x'}': content => 'x' }}\nexec {{ 'boom': command => '/bin/false' }}\n"
    result, _ = run_hook("puppet", tmp_path / "w", deployment("puppet", manifest))
    assert result["deploy_status_code"] == 6


def test_delete_config_runs(tmp_path):
    """A DELETE config runs like any other: it sees deploy_action DELETE and removes the file."""
    target = tmp_path / "installed"
    target.write_text("x")
    manifest = f"if $facts['deploy_action'] == 'DELETE' {{ file {{ '{target}': ensure => absent }} }}"
    result, _ = run_hook("puppet", tmp_path / "w", deployment("puppet", manifest, action="DELETE"))
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert not target.exists()


def test_timeout_kills_puppet_and_its_children(tmp_path):
    """At the timeout the whole tree (puppet and the command it runs) is stopped: status 124."""
    pidfile = tmp_path / "pid"
    manifest = f"exec {{ 'wait': command => '/bin/sh -c \"echo $$ > {pidfile}; exec sleep 600\"' }}"
    # Puppet takes a few seconds to reach the exec on an idle machine, over 15 s on a loaded one.
    item = deployment("puppet", manifest, options={"timeout": 30})
    result, _ = run_hook("puppet", tmp_path / "w", item)
    assert result["deploy_status_code"] == 124
    assert "timed out after 30 s" in result["deploy_stderr"]
    assert pidfile.exists(), "puppet did not reach the exec within 30 s"
    assert not pid_is_alive(int(pidfile.read_text()))


def test_missing_puppet_is_a_failure_naming_it(tmp_path):
    """No puppet: FAILED (127) with which tool is missing and how to install it."""
    item = deployment("puppet", "notice('hi')")
    result, _ = run_hook("puppet", tmp_path / "w", item, ANNEAL_PUPPET=str(tmp_path / "none"))
    assert result["deploy_status_code"] == 127
    assert "puppet not found" in result["deploy_stderr"]
    assert "apt-get install puppet" in result["deploy_stderr"]


def test_no_puppet_on_path_is_a_failure(tmp_path):
    """Without the setting, a PATH with no puppet is a failure too (never a silent success)."""
    item = deployment("puppet", "notice('hi')")
    env = {"PATH": str(tmp_path)}
    result, _ = run_hook("puppet", tmp_path / "w", item, **env, ANNEAL_PUPPET="")
    assert result["deploy_status_code"] == 127
    assert "puppet not found on PATH" in result["deploy_stderr"]


def test_bad_options_are_named(tmp_path):
    """An option of the wrong type fails the deployment with its name; puppet is not run."""
    item = deployment("puppet", "notice('hi')", options={"debug": {"x": 1}})
    result, _ = run_hook("puppet", Path(tmp_path / "w"), item)
    assert result["deploy_status_code"] == 1
    assert "options.debug" in result["deploy_stderr"]
