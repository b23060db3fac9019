#!/usr/bin/env bash
# Ansible's openstack.cloud collection (its stack module drives Heat's API) with ansible-core and
# openstacksdk, in their own virtualenv (.venv/tools/ansible-openstack):
# tests/integration/test_heat_api_ansible.py runs a playbook against Anneal's Orchestration API v1.
# The collection comes from the `ansible` package on PyPI, which bundles it (Galaxy is not a registry
# this build reaches); only that collection is unpacked from its wheel, not the other ~100.
# openstacksdk is pinned at 4.5.0: the collection (2.5.0) reads `openstack.version` from the package,
# which the newest openstacksdk no longer imports on `import openstack`.
# Idempotent: a marker holding the pins makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/../.."
PINS="ansible-core==2.19.14 openstacksdk==4.5.0 ansible==12.3.0"
venv=.venv/tools/ansible-openstack
marker=$venv/.pins
collection=$venv/collections/ansible_collections/openstack/cloud
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$PINS" ] && [ -f "$collection/MANIFEST.json" ]; then
    echo "ansible-openstack: present in $venv"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check ansible-core==2.19.14 openstacksdk==4.5.0 \
    2> >(grep -v "^WARNING: Location" >&2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$work" ansible==12.3.0 \
    2> >(grep -v "^WARNING: Location" >&2)
"$venv/bin/python" - "$work"/ansible-12.3.0-py3-none-any.whl "$venv/collections" <<'PY'
import sys
import zipfile

wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith("ansible_collections/openstack/cloud/")])
PY
echo "$PINS" > "$marker"
echo "ansible-openstack: ansible-core 2.19.14, openstacksdk 4.5.0 and openstack.cloud $(grep -o '"version": "[^"]*"' "$collection/MANIFEST.json" | head -1) in $venv"
