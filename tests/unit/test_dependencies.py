"""The agent and the hooks stay light: they import nothing of the control plane."""

from __future__ import annotations

import json
import subprocess
import sys


def test_agent_and_hooks_import_without_control_plane_dependencies():
    """Importing the agent and the script hook pulls in no SQLAlchemy, YAML, boto3 or control code."""
    code = (
        "import json, sys\n"
        "import agent.cli, agent.loop, agent.wire, hooks.common, hooks.script.hook\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sqlalchemy', 'yaml', 'boto3', 'control', 'aiosqlite'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert [] == json.loads(out.stdout)


def test_wire_imports_only_the_standard_library():
    """agent.wire, shared by every side, imports nothing outside the standard library."""
    code = (
        "import json, sys\nbefore = set(sys.modules)\nimport agent.wire\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(json.dumps(sorted(m for m in new if m not in sys.stdlib_module_names and m != 'agent')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert [] == json.loads(out.stdout)
