#!/usr/bin/env bash
# A real Keystone (identity service) with uwsgi, in its own virtualenv (.venv/tools/keystone):
# tests/support/keystone.py serves it on loopback (SQLite, fernet tokens) so
# tests/integration/test_keystone.py drives Anneal's Heat API through Keystone auth exactly as
# the openstack CLI drives Heat (docs/heat-api.md). Measured on a fresh directory: see below.
# Idempotent: a marker holding the pins makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/../.."
PINS="keystone==30.0.0 uwsgi==2.0.31"
# The resolved path: .venv/tools may be a link, and the venv's scripts name the path it was made at.
mkdir -p .venv/tools
venv=$(readlink -f .venv/tools)/keystone
marker=$venv/.pins
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$PINS" ] && [ -x "$venv/bin/keystone-manage" ] \
    && [ -x "$venv/bin/uwsgi" ]; then
    echo "keystone: present in $venv"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check $PINS 2> >(grep -v "^WARNING: Location" >&2)
echo "$PINS" > "$marker"
echo "keystone: $("$venv/bin/pip" show keystone 2>/dev/null | grep ^Version) and uwsgi $("$venv/bin/uwsgi" --version) in $venv"
