"""The salt hook against real salt 3008.3 (salt-call --local, in .venv/tools/salt)."""

from __future__ import annotations

import json

import pytest

from hooks.salt.results import summarise
from tests.support.hookrun import TOOL_PATHS, deployment, pid_is_alive, require, run_hook


@pytest.fixture(scope="module", autouse=True)
def salt_installed():
    require(TOOL_PATHS["ANNEAL_SALT_CALL"])


def test_inputs_are_pillar_and_minion_options(tmp_path):
    """Inputs are pillar and (Heat's way) minion options; an output file comes back."""
    out = tmp_path / "out.txt"
    state = f"""
write:
  file.managed:
    - name: {out}
    - contents: "p={{{{ pillar['role'] }}}} o={{{{ salt['config.get']('role') }}}} a={{{{ pillar['deploy_action'] }}}}"
result:
  file.managed:
    - name: {{{{ pillar['heat_outputs_path'] }}}}.result
    - contents: done
"""
    item = deployment("salt", state, inputs={"role": "cache"}, outputs=("result",))
    result, _ = run_hook("salt", tmp_path / "w", item)
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert out.read_text().strip() == "p=cache o=cache a=CREATE"
    assert result["result"].strip() == "done"
    assert result["deploy_stdout"].startswith("Succeeded: 2 (changed=2)\nFailed: 0\n")
    assert list((tmp_path / "w" / "salt" / "working").iterdir()) == []


def test_input_values_are_data_not_templates(tmp_path):
    """An input holding Jinja is passed as data: pillar files are JSON, never rendered."""
    out = tmp_path / "out.txt"
    state = f"w:\n  file.managed:\n    - name: {out}\n    - contents_pillar: text\n"
    item = deployment("salt", state, inputs={"text": "{{ 7 * 6 }}"})
    result, _ = run_hook("salt", tmp_path / "w", item)
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert out.read_text().strip() == "{{ 7 * 6 }}"


def test_a_failed_state_fails_with_its_line(tmp_path):
    """A failing state fails the deployment; the summary names it."""
    state = "ok:\n  test.succeed_without_changes\nboom:\n  cmd.run:\n    - name: /bin/false\n"
    result, _ = run_hook("salt", tmp_path / "w", deployment("salt", state))
    assert result["deploy_status_code"] != 0
    assert "Failed: 1" in result["deploy_stdout"]
    assert "FAILED: boom (cmd.run)" in result["deploy_stderr"]


def test_render_error_is_a_failure(tmp_path):
    """A state that does not render is a failure with salt's message."""
    result, _ = run_hook("salt", tmp_path / "w", deployment("salt", "broken: {{ nope(\n"))
    assert result["deploy_status_code"] != 0
    assert "salt:" in result["deploy_stderr"]


def test_delete_config_runs(tmp_path):
    """A DELETE config runs with deploy_action DELETE in the pillar."""
    target = tmp_path / "installed"
    target.write_text("x")
    state = f"{{% if pillar['deploy_action'] == 'DELETE' %}}\ngone:\n  file.absent:\n    - name: {target}\n{{% endif %}}\n"
    result, _ = run_hook("salt", tmp_path / "w", deployment("salt", state, action="DELETE"))
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert not target.exists()


def test_timeout_kills_salt_and_its_commands(tmp_path):
    """At the timeout salt-call and the command it runs are stopped: 124."""
    pidfile = tmp_path / "pid"
    state = f"wait:\n  cmd.run:\n    - name: echo $$ > {pidfile}; exec sleep 600\n"
    result, _ = run_hook("salt", tmp_path / "w", deployment("salt", state, options={"timeout": 10}))
    assert result["deploy_status_code"] == 124
    assert pidfile.exists(), "salt did not reach its state within 10 s"
    assert not pid_is_alive(int(pidfile.read_text()))


def test_missing_salt_is_a_failure_naming_it(tmp_path):
    """No salt-call: FAILED (127), naming the tool and how to install it."""
    item = deployment("salt", "x:\n  test.nop\n")
    result, _ = run_hook("salt", tmp_path / "w", item, ANNEAL_SALT_CALL=str(tmp_path / "none"))
    assert result["deploy_status_code"] == 127
    assert "salt-call not found" in result["deploy_stderr"]
    assert "salt==3008.3" in result["deploy_stderr"]


def test_all_states_succeeded_overrides_a_nonzero_retcode():
    """Heat's rule: the summary of a run whose states all succeeded says so (rc is then ignored)."""
    states = {"local": {"a_|-x_|-x_|-nop": {"result": True, "__run_num__": 0, "comment": "", "changes": {}}}}
    assert summarise(json.dumps(states)).all_succeeded
    states["local"]["b_|-y_|-y_|-run"] = {"result": False, "__run_num__": 1, "comment": "no", "changes": {}}
    assert not summarise(json.dumps(states)).all_succeeded
    assert not summarise(json.dumps({"local": {}})).all_succeeded
