#!/usr/bin/env bash
# HAProxy, Debian's package, in front of several `anneal serve` on one PostgreSQL
# (tests/support/haproxy.py; tests/integration/test_fleet_processes.py). Only the binary is
# used: the package's own service is stopped and disabled when systemd runs it.
set -euo pipefail
if ! command -v haproxy >/dev/null; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends haproxy
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
        systemctl disable --now haproxy.service || true
    fi
fi
echo "$(haproxy -v | head -1) at $(command -v haproxy)"
