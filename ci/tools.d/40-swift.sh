#!/usr/bin/env bash
# OpenStack Swift (proxy/account/container/object servers with tempauth, tempurl and
# s3api) in its own virtualenv, plus memcached (tempauth keeps its tokens there) and
# faketime (clock-skew tests). Tests start an all-in-one from this install:
# tests/support/swift.py. Recipe: shared env notes, section 5.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv/tools/swift
need_apt=()
command -v memcached >/dev/null || need_apt+=(memcached)
command -v faketime >/dev/null || need_apt+=(faketime)
if [ ${#need_apt[@]} -gt 0 ]; then
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${need_apt[@]}"
fi
if [ ! -x "$venv/bin/swift-proxy-server" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'swift>=2.30' 'python-swiftclient>=4'
fi
echo "swift: $("$venv/bin/python" -c 'import swift; print(swift.__version__)') in $venv"
echo "memcached: $(command -v memcached); faketime: $(command -v faketime)"
