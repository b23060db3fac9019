#!/usr/bin/env bash
# ansible-core + ansible-runner for the ansible hook, in their own virtualenv
# (.venv/tools/ansible) so the agent's environment stays clean.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv/tools/ansible
if ! "$venv/bin/python" -c 'import ansible_runner, ansible' >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check ansible-core ansible-runner
fi
echo "ansible-runner $("$venv/bin/ansible-runner" --version) and $("$venv/bin/ansible-playbook" --version | head -1) in $venv"
