#!/usr/bin/env bash
# PostgreSQL server binaries (initdb, pg_ctl) for the tests that run the control plane on
# PostgreSQL. The tests start their own throw-away cluster in a temp dir on a free loopback
# port (tests/support/pg.py); nothing here starts or configures a cluster.
set -euo pipefail
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends postgresql
fi
ls -d /usr/lib/postgresql/*/bin | sed 's/^/postgresql: /'
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "ci/tools.d/30-postgresql.sh: running as root but no 'postgres' user to run initdb as" >&2
    exit 1
fi
