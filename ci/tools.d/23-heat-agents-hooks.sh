#!/usr/bin/env bash
# Heat's own hooks (heat-agents 13.0.0): they ship only in the source distribution, not in
# the wheel. Unpacked, unchanged, under .venv/tools/heat-agents/ for the hook-dir tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=13.0.0
dest=.venv/tools/heat-agents
src=$dest/heat_agents-$version  # the sdist file and its top dir use an underscore
if [ ! -f "$src/heat-config-script/install.d/hook-script.py" ]; then
    rm -rf "$dest"
    mkdir -p "$dest"
    python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$dest" "heat-agents==$version"
    tar -xzf "$dest/heat_agents-$version.tar.gz" -C "$dest"
fi
echo "heat-agents $version hooks in $src (heat-config-*/install.d/hook-*.py)"
