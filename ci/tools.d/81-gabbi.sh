#!/usr/bin/env bash
# gabbi and Heat's own API tests (the gabbi YAML files of the heat-tempest-plugin package),
# in their own virtualenv (.venv/tools/gabbi): tests/integration/test_heat_api_gabbi.py runs
# them against Anneal's Orchestration API v1 (docs/heat-api.md). Only the YAML files of
# heat-tempest-plugin are used (its Python needs tempest), so its sdist is unpacked, not installed.
# Idempotent: a marker holding the pins makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/../.."
PINS="gabbi==4.2.3 heat-tempest-plugin==3.0.0"
venv=.venv/tools/gabbi
marker=$venv/.pins
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$PINS" ] && [ -d "$venv/gabbits" ]; then
    echo "gabbi: present in $venv"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check gabbi==4.2.3 2> >(grep -v "^WARNING: Location" >&2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$work" heat-tempest-plugin==3.0.0 2> >(grep -v "^WARNING: Location" >&2)
tar -xzf "$work"/heat_tempest_plugin-3.0.0.tar.gz -C "$work" 2>/dev/null \
    || tar -xzf "$work"/heat-tempest-plugin-3.0.0.tar.gz -C "$work"
cp -r "$work"/heat*tempest*plugin-3.0.0/heat_tempest_plugin/tests/api/gabbits "$venv/gabbits"
echo "$PINS" > "$marker"
echo "gabbi: $("$venv/bin/pip" show gabbi 2>/dev/null | grep ^Version) with $(ls "$venv/gabbits" | wc -l) gabbi files of heat-tempest-plugin 3.0.0 in $venv"
