"""The ansible hook against real ansible-core + ansible-runner (in .venv/tools/ansible)."""

from __future__ import annotations

import pytest

from tests.support.hookrun import TOOL_PATHS, deployment, pid_is_alive, require, run_hook


@pytest.fixture(scope="module", autouse=True)
def runner_installed():
    require(TOOL_PATHS["ANNEAL_ANSIBLE_RUNNER"])


def play(*tasks: str) -> str:
    body = "".join(f"    - {task}\n" for task in tasks)
    return f"- hosts: localhost\n  gather_facts: false\n  tasks:\n{body}"


def test_inputs_are_extra_vars_and_outputs_come_back(tmp_path):
    """Inputs are extra vars; outputs come from heat_outputs_path files and from set_stats."""
    out = tmp_path / "out.txt"
    playbook = play(
        f"copy: {{dest: {out}, content: 'role={{{{ role }}}} action={{{{ deploy_action }}}}'}}",
        "copy: {dest: '{{ heat_outputs_path }}.from_file', content: 'f-{{ role }}'}",
        "set_stats: {data: {from_stats: 's-{{ role }}'}}",
    )
    item = deployment("ansible", playbook, inputs={"role": "db"}, outputs=("from_file", "from_stats"))
    result, _ = run_hook("ansible", tmp_path / "w", item)
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert (result["from_file"], result["from_stats"]) == ("f-db", "s-db")
    assert out.read_text() == "role=db action=CREATE"
    assert "PLAY RECAP" in result["deploy_stdout"]
    assert "\r" not in result["deploy_stdout"]


def test_private_data_dir_is_removed(tmp_path):
    """Each run's private data dir (extra vars hold the inputs) is gone after the run."""
    item = deployment("ansible", play("debug: {msg: hi}"), inputs={"password": "pw-123"})
    result, _ = run_hook("ansible", tmp_path / "w", item)
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert list((tmp_path / "w" / "ansible" / "working").iterdir()) == []


def test_failed_task_is_named(tmp_path):
    """A failing task fails the deployment, and the result names the task and host."""
    item = deployment(
        "ansible", play("debug: {msg: fine}", "name: the broken step\n      command: /bin/false")
    )
    result, _ = run_hook("ansible", tmp_path / "w", item)
    assert result["deploy_status_code"] == 2
    assert "task 'the broken step' failed on localhost" in result["deploy_stderr"]


def test_tags_and_skip_tags_options(tmp_path):
    """options.tags and skip_tags reach ansible-playbook."""
    a, b, c = (tmp_path / n for n in "abc")
    playbook = play(
        f"copy: {{dest: {a}, content: a}}\n      tags: [one]",
        f"copy: {{dest: {b}, content: b}}\n      tags: [one, two]",
        f"copy: {{dest: {c}, content: c}}\n      tags: [three]",
    )
    item = deployment("ansible", playbook, options={"tags": "one", "skip_tags": ["two"]})
    result, _ = run_hook("ansible", tmp_path / "w", item)
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert (a.exists(), b.exists(), c.exists()) == (True, False, False)


def test_delete_config_runs(tmp_path):
    """A DELETE config runs with deploy_action DELETE."""
    target = tmp_path / "installed"
    target.write_text("x")
    playbook = play(f"file: {{path: {target}, state: absent}}\n      when: deploy_action == 'DELETE'")
    result, _ = run_hook("ansible", tmp_path / "w", deployment("ansible", playbook, action="DELETE"))
    assert result["deploy_status_code"] == 0, result["deploy_stderr"]
    assert not target.exists()


def test_timeout_kills_the_play(tmp_path):
    """At the timeout the runner, ansible-playbook and the task's command are all stopped."""
    pidfile = tmp_path / "pid"
    playbook = play(f"shell: echo $$ > {pidfile}; exec sleep 600")
    result, _ = run_hook("ansible", tmp_path / "w", deployment("ansible", playbook, options={"timeout": 12}))
    assert result["deploy_status_code"] == 124
    assert pidfile.exists(), "the play did not reach its task within 12 s"
    assert not pid_is_alive(int(pidfile.read_text()))


def test_missing_runner_is_a_failure_naming_it(tmp_path):
    """No ansible-runner: FAILED (127), naming the tool and how to install it."""
    item = deployment("ansible", play("debug: {msg: hi}"))
    result, _ = run_hook("ansible", tmp_path / "w", item, ANNEAL_ANSIBLE_RUNNER=str(tmp_path / "none"))
    assert result["deploy_status_code"] == 127
    assert "ansible-runner not found" in result["deploy_stderr"]
    assert "pip install ansible-core ansible-runner" in result["deploy_stderr"]
