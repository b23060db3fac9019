#!/usr/bin/env bash
# Installs the real components the tests drive (puppet, salt, Swift, PostgreSQL, ...).
# Each ci/tools.d/NN-name.sh installs one component; it must be idempotent and quick
# when the component is already there, and write where it put things to stdout.
# A script is re-run only when its content changed since its last success
# (stamps in .venv/tools/), so `make test` stays fast after the first run.
#
# Three lanes run side by side, each in name order: the scripts that call apt-get (one at a
# time: apt and dpkg hold machine-wide locks), and the ones that only build virtualenvs from
# PyPI, dealt alternately to two lanes (their downloads overlap the others' unpacking and
# compiling). A fresh clone's tools took 313 s one after another, 163 s so (2026-11-27). Each
# script's output is printed whole when it ends; a failure fails the run once all lanes end.
set -euo pipefail
cd "$(dirname "$0")/.."
stamps=.venv/tools
mkdir -p "$stamps"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# Prints a script's whole log between its name and *how* it ended, one script at a time.
report() {
    { echo "== $1 ($2)"; cat "$logs/$1.log"; echo "== $1 $3"; } | flock "$logs" cat
}

# Runs the scripts named, in order, each only when its stamp is not its current content.
lane() {
    local script name sum started
    for script in "$@"; do
        name=$(basename "$script" .sh)
        sum=$(sha256sum "$script" | cut -d' ' -f1)
        if [ -f "$stamps/$name" ] && [ "$(cat "$stamps/$name")" = "$sum" ]; then
            continue
        fi
        started=$SECONDS
        if bash "$script" > "$logs/$name.log" 2>&1; then
            echo "$sum" > "$stamps/$name"
            report "$name" "$script" "installed in $((SECONDS - started)) s"
        else
            report "$name" "$script" "FAILED after $((SECONDS - started)) s" >&2
            return 1
        fi
    done
}

apt=() pypi1=() pypi2=()
for script in ci/tools.d/*.sh; do
    [ -e "$script" ] || continue
    if grep -q "apt-get" "$script"; then
        apt+=("$script")
    elif [ ${#pypi1[@]} -le ${#pypi2[@]} ]; then
        pypi1+=("$script")
    else
        pypi2+=("$script")
    fi
done
lanes=()
lane "${apt[@]}" &
lanes+=($!)
lane "${pypi1[@]}" &
lanes+=($!)
lane "${pypi2[@]}" &
lanes+=($!)
status=0
for pid in "${lanes[@]}"; do
    wait "$pid" || status=1
done
exit $status
