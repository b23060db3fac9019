#!/usr/bin/env bash
# lintian, Debian's package checker, for the agent's .deb (tests/integration/test_packaging.py).
set -euo pipefail
if ! command -v lintian >/dev/null; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends lintian
fi
echo "lintian $(lintian --version | awk '{print $2}') at $(command -v lintian)"
