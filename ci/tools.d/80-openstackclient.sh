#!/usr/bin/env bash
# The openstack CLI with Heat's plugin (python-openstackclient + python-heatclient), in its
# own virtualenv (.venv/tools/openstackclient): tests/integration/test_heat_api_cli.py drives
# Anneal's Orchestration API v1 with it exactly as an operator drives Heat (docs/heat-api.md).
# Idempotent: a marker holding the pins makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/../.."
PINS="python-openstackclient==10.5.0 python-heatclient==5.3.0"
venv=.venv/tools/openstackclient
marker=$venv/.pins
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$PINS" ] && [ -x "$venv/bin/openstack" ]; then
    echo "openstackclient: present in $venv"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check $PINS 2> >(grep -v "^WARNING: Location" >&2)
echo "$PINS" > "$marker"
echo "openstackclient: $("$venv/bin/openstack" --version 2>&1) with python-heatclient in $venv"
