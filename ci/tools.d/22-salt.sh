#!/usr/bin/env bash
# Salt for the salt hook, in its own virtualenv (.venv/tools/salt). Pinned to 3008.3: later
# releases need a certifi the registry lacks. Installed without salt's full dependency set
# (which compiles timelib for a minute); salt-call --local needs only the packages below.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv/tools/salt
if ! "$venv/bin/salt-call" --version 2>/dev/null | grep -q '3008\.3'; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps 'salt==3008.3'
    "$venv/bin/pip" install -q --disable-pip-version-check jinja2 markupsafe pyyaml msgpack \
        looseversion packaging psutil distro requests pycryptodomex tornado jmespath \
        cryptography pyzmq
fi
echo "$("$venv/bin/salt-call" --version) in $venv"
