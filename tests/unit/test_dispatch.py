"""Choosing and reading hooks."""

from __future__ import annotations

import json
import sys

from agent import dispatch


def test_executable_in_hook_dir_wins(tmp_path):
    """A hook executable named after the group is used before the built-in one."""
    hook = tmp_path / "script"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    assert [str(hook)] == dispatch.hook_argv("script", [str(tmp_path)])


def test_builtin_hook_and_unknown_group(tmp_path):
    """script is built in; an unknown group has no hook; unsafe characters are stripped."""
    assert [sys.executable, "-m", "hooks.script"] == dispatch.hook_argv("script", [str(tmp_path)])
    assert dispatch.hook_argv("Heat::Ungrouped", [str(tmp_path)]) is None
    assert dispatch.hook_argv("../../bin/sh", [str(tmp_path)]) is None


def test_docker_compose_is_built_in_under_its_module_name(tmp_path):
    """Group docker-compose runs hooks.docker_compose (a module name has no '-')."""
    argv = dispatch.hook_argv("docker-compose", [str(tmp_path)])
    assert [sys.executable, "-m", "hooks.docker_compose"] == argv


def test_groups_heats_agent_skips_complete_and_other_missing_hooks_fail(tmp_path):
    """os-apply-config and apply-config without a hook complete (as Heat skips them); others fail naming the dirs."""
    for group in ("os-apply-config", "apply-config"):
        assert dispatch.hook_argv(group, [str(tmp_path)]) is None
        skipped = dispatch.missing_hook(group, [str(tmp_path)])
        assert skipped.status_code == 0 and "skipped" in skipped.stderr and str(tmp_path) in skipped.stderr
    failed = dispatch.missing_hook("Heat::Ungrouped", [str(tmp_path)])
    assert failed.status_code == 127 and str(tmp_path) in failed.stderr and "Heat::Ungrouped" in failed.stderr


def test_json_stdout_is_the_result():
    """A JSON object on stdout is the result, whatever the exit code (Heat's rule)."""
    sig = dispatch.result_from(0, json.dumps({"deploy_status_code": 2, "x": "y"}).encode(), b"", "h")
    assert (2, {"x": "y"}) == (sig.status_code, dict(sig.outputs))


def test_no_result_is_a_failure_never_success():
    """Exit 0 with nothing on stdout is a failure with the reason (Heat would call it success)."""
    sig = dispatch.result_from(0, b"", b"oops", "h")
    assert 1 == sig.status_code
    assert "printed no result" in sig.stderr and "oops" in sig.stderr


def test_garbage_stdout_keeps_exit_code():
    """Non-JSON stdout is a failure carrying the hook's own exit code and output."""
    sig = dispatch.result_from(5, b"not json", b"", "h")
    assert (5, "not json") == (sig.status_code, sig.stdout)


def test_string_inputs_are_coerced_as_heat_does():
    """String-typed inputs holding numbers or maps reach the hook as strings (maps as JSON)."""
    item = {
        "inputs": [
            {"name": "a", "type": "String", "value": 3},
            {"name": "b", "type": "String", "value": {"k": 1}},
            {"name": "c", "type": "Json", "value": {"k": 1}},
            {"name": "d", "type": "String", "value": None},
        ]
    }
    inputs = dispatch.coerce_inputs(item)["inputs"]
    assert isinstance(inputs, list)
    values = [i["value"] for i in inputs]
    assert ["3", '{"k": 1}', {"k": 1}, None] == values
