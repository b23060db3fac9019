"""Each hook's check mode (``ANNEAL_CHECK=1``) against the real tool: in sync, drifted with the diff, unknown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.hookrun import TOOL_PATHS, deployment, require, run_hook

PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - copy: {dest: "{{ target }}", content: "managed\\n"}
"""
SALT = """
managed:
  file.managed:
    - name: {{ pillar['target'] }}
    - contents: managed
"""
CONFIGS = {"ansible": PLAYBOOK, "salt": SALT}
SETTINGS = {"ansible": "ANNEAL_ANSIBLE_RUNNER", "salt": "ANNEAL_SALT_CALL"}


def _check(tool: str, work: Path, item: dict[str, Any]) -> dict[str, Any]:
    result, _ = run_hook(tool, work / "hooks", item, ANNEAL_CHECK="1")
    return result


@pytest.mark.parametrize("tool", ["ansible", "salt"])
def test_a_tool_check_finds_a_changed_file_and_changes_nothing(tool: str, tmp_path: Path) -> None:
    """The file as the config makes it: in sync; edited behind the tool's back: drifted, the diff shows the edit.

    puppet's check runs end to end in test_drift.py (stack check, converge).
    """
    require(TOOL_PATHS[SETTINGS[tool]])
    target = tmp_path / "managed.txt"
    item = deployment(tool, CONFIGS[tool], inputs={"target": str(target)})
    target.write_text("managed\n")  # what applying the config writes
    in_sync = _check(tool, tmp_path, item)
    assert "in_sync" == in_sync["anneal"]["check"], in_sync
    target.write_text("edited by hand\n")
    drifted = _check(tool, tmp_path, item)
    assert "drifted" == drifted["anneal"]["check"], drifted
    assert "edited by hand" in drifted["deploy_stdout"], drifted["deploy_stdout"]
    assert "edited by hand\n" == target.read_text()  # the check changed nothing


def test_a_script_check_program_says_drifted_by_its_exit_status(tmp_path: Path) -> None:
    """options.check: exit 0 is in sync, 1 drifted (its stdout the diff), 2 unknown (its stderr why)."""
    flag = tmp_path / "state"
    probe = '#!/bin/sh\ncase "$(cat "$FLAG")" in ok) exit 0;; bad) echo "-ok +bad"; exit 1;; esac\necho lost >&2; exit 2\n'
    item = deployment("script", "#!/bin/sh\nexit 9\n", inputs={"FLAG": str(flag)}, options={"check": probe})
    verdicts = []
    for state in ("ok", "bad", "gone"):
        flag.write_text(state)
        verdicts.append(_check("script", tmp_path, item)["anneal"])
    assert ["in_sync", "drifted", "unknown"] == [v["check"] for v in verdicts]
    assert "lost" in verdicts[2]["reason"]


@pytest.mark.parametrize(
    ("tool", "options", "why"),
    [
        ("script", {}, "no check program"),
        ("docker-compose", {}, "docker-compose hook has no check mode"),
        ("chef", {}, "chef hook has no check mode"),
    ],
)
def test_a_hook_that_cannot_check_says_unknown(
    tool: str, options: dict[str, Any], why: str, tmp_path: Path
) -> None:
    """A config without a check program, and hooks without a check mode, answer unknown and run nothing."""
    marker = tmp_path / "ran"
    item = deployment(tool, f"#!/bin/sh\ntouch {marker}\n", options=options)
    result = _check(tool.replace("-", "_"), tmp_path, item)
    assert "unknown" == result["anneal"]["check"], result
    assert why in result["anneal"]["reason"]
    assert not marker.exists()
