#!/usr/bin/env bash
# Heat's own agent chain, from PyPI, in its own virtualenv (docs/heat-compat.md):
#   .venv/tools/heat-chain/venv  os-collect-config, os-refresh-config, os-apply-config (+ dib-run-parts)
#   .venv/tools/heat-chain/sdist  the heat-agents source distribution: heat-config's 55-heat-config,
#                                 heat-config-notify, the os-apply-config templates and hook-script.py
# The heat-agents wheel installs no hooks (only release notes), hence the sdist.
# Idempotent: a marker holding the pins makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/../.."
PINS="os-collect-config==14.1.0 os-refresh-config==14.1.0 os-apply-config==14.1.0"
SDIST_PIN="heat-agents==13.0.0"
base=.venv/tools/heat-chain  # not heat-agents/: 23-heat-agents-hooks.sh owns that dir
venv=$base/venv
marker=$venv/.heat-agents
want="$PINS $SDIST_PIN"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$want" ] && [ -x "$base/sdist/heat-config/bin/heat-config-notify" ]; then
    echo "heat-agents: present in $base"
    exit 0
fi
rm -rf "$base"
mkdir -p "$base"
python3 -m venv "$venv"
pipq() { "$venv/bin/python" -m pip "$@" 2> >(grep -v "^WARNING: Location" >&2); }
pipq install --quiet $PINS
# dib-run-parts comes with os-refresh-config; add dib-utils only if it did not.
if [ ! -x "$venv/bin/dib-run-parts" ]; then
    pipq install --quiet dib-utils
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pipq download --quiet --no-deps --no-binary :all: --dest "$tmp" "$SDIST_PIN"
tar -xzf "$tmp"/heat[-_]agents-13.0.0.tar.gz -C "$tmp"
mv "$tmp"/heat[-_]agents-13.0.0 "$base/sdist"
chmod +x "$base"/sdist/heat-config/bin/heat-config-notify \
    "$base"/sdist/heat-config/os-refresh-config/configure.d/55-heat-config \
    "$base"/sdist/heat-config-script/install.d/hook-script.py
echo "$want" > "$marker"
echo "heat-agents: venv $venv ($("$venv/bin/os-collect-config" --version 2>&1 | tail -1 || true)), sdist $base/sdist"
