#!/usr/bin/env bash
# Installs the real components the tests drive (puppet, salt, Swift, PostgreSQL, ...).
# Each ci/tools.d/NN-name.sh installs one component; it must be idempotent and quick
# when the component is already there, and write where it put things to stdout.
# A script is re-run only when its content changed since its last success
# (stamps in .venv/tools/), so `make test` stays fast after the first run.
set -euo pipefail
cd "$(dirname "$0")/.."
stamps=.venv/tools
mkdir -p "$stamps"
for script in ci/tools.d/*.sh; do
    [ -e "$script" ] || continue
    name=$(basename "$script" .sh)
    sum=$(sha256sum "$script" | cut -d' ' -f1)
    if [ -f "$stamps/$name" ] && [ "$(cat "$stamps/$name")" = "$sum" ]; then
        continue
    fi
    echo "== installing $name ($script)"
    started=$SECONDS
    bash "$script"
    echo "== $name installed in $((SECONDS - started)) s"
    echo "$sum" > "$stamps/$name"
done
