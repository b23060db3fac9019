#!/usr/bin/env bash
# A real Keystone (identity service) with uwsgi, in its own virtualenv (.venv/tools/keystone):
# tests/support/keystone.py serves it on loopback (SQLite, fernet tokens) so
# tests/integration/test_keystone.py drives Anneal's Heat API through Keystone auth exactly as
# the openstack CLI drives Heat (docs/heat-api.md). On a fresh directory it took 2 min 15 s
# (2026-11-26, load average 3 on 2 cores; uwsgi compiles from source); a second run, 0.03 s.
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
# uwsgi has no wheel: pip builds it, which needs a C compiler and Python's headers.
headers=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h
if ! command -v cc >/dev/null 2>&1 || [ ! -f "$headers" ]; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends gcc libc6-dev python3-dev
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check $PINS 2> >(grep -v "^WARNING: Location" >&2)
echo "$PINS" > "$marker"
echo "keystone: $("$venv/bin/pip" show keystone 2>/dev/null | grep ^Version) and uwsgi $("$venv/bin/uwsgi" --version) in $venv"
