"""The agent, the hooks and the operator CLI stay light: none imports the control plane's server side."""

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


def test_operator_cli_imports_without_the_server_side():
    """Importing control.cli and building its parser loads no SQLAlchemy, no aiohttp server, no server code."""
    code = (
        "import json, sys\n"
        "import control.cli\n"
        "control.cli.build_parser()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'aiosqlite')\n"
        "    or m.startswith('aiohttp.web') or (m.startswith('control.')\n"
        "    and not m.startswith(('control.cli', 'control.hot'))))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert [] == json.loads(out.stdout)
