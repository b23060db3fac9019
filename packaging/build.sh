#!/usr/bin/env bash
# Builds the agent's wheel and its Debian package (docs/operations.md).
#   packaging/build.sh [OUT_DIR]        (default dist/)
# OUT_DIR/anneal-<version>-py3-none-any.whl    the wheel (agent, hooks and control plane code;
#                                              the agent needs only the base dependencies)
# OUT_DIR/anneal-agent_<version>_<arch>.deb    a self-contained virtualenv in /opt/anneal-agent
#                                              (the wheel + aiohttp + cryptography, on the
#                                              distro's /usr/bin/python3), a systemd unit with
#                                              Restart=on-failure, the relay's unit (disabled),
#                                              /etc/anneal-agent/agent.env, bash and zsh completion,
#                                              and a postinst that makes /var/lib/anneal-agent
#                                              (root:root, 0700).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
PYTHON=${PACKAGE_PYTHON:-/usr/bin/python3}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/pyproject.toml" | head -1)
arch=$(dpkg --print-architecture)
pyver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
pipq() { "$@" 2> >(grep -v "^WARNING: Location" >&2); }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. The wheel.
rm -f "$out"/anneal-"$version"-*.whl
pipq "$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$out" "$root"
wheel=$(ls "$out"/anneal-"$version"-*.whl)
echo "wheel: $wheel"

# 2. The virtualenv, built in a staging root at its final path's name, then relocated.
stage=$work/root
venv=$stage/opt/anneal-agent
"$PYTHON" -m venv "$venv"
pipq "$venv/bin/python" -m pip install --quiet --no-compile "$wheel"
"$venv/bin/python" -m pip uninstall --quiet --yes pip setuptools >/dev/null 2>&1 || true
# Scripts name their interpreter by absolute path: make it the installed one.
for f in "$venv"/bin/*; do
    if [ -f "$f" ] && [ ! -L "$f" ] && head -c 2 "$f" | grep -q '#!'; then
        sed -i "1s|^#!$venv/bin/|#!/opt/anneal-agent/bin/|" "$f"
    fi
done
rm -f "$venv"/bin/activate* "$venv"/bin/Activate.ps1 "$venv"/bin/anneal  # the control plane CLI needs [control]
sed -i "s|$venv|/opt/anneal-agent|g" "$venv/pyvenv.cfg"
find "$venv" -name __pycache__ -type d -prune -exec rm -rf {} +
# Debian strips shared objects; so do we (the wheels ship them with their symbols).
find "$venv" -name '*.so' -exec strip --strip-unneeded {} +

# 3. systemd units (the relay's is not enabled), default config, maintainer scripts.
install -D -m 0644 "$root/packaging/systemd/anneal-agent.service" "$stage/lib/systemd/system/anneal-agent.service"
install -D -m 0644 "$root/packaging/systemd/anneal-relay.service" "$stage/lib/systemd/system/anneal-relay.service"
install -D -m 0600 "$root/packaging/debian/agent.env" "$stage/etc/anneal-agent/agent.env"
# Shell completion (committed, made by `python -m control.cli.completion`: the agent has no shtab).
install -D -m 0644 "$root/packaging/completion/bash/anneal-agent" "$stage/usr/share/bash-completion/completions/anneal-agent"
install -D -m 0644 "$root/packaging/completion/zsh/_anneal-agent" "$stage/usr/share/zsh/vendor-completions/_anneal-agent"
mkdir -p "$stage/DEBIAN"
for script in postinst prerm postrm; do
    install -m 0755 "$root/packaging/debian/$script" "$stage/DEBIAN/$script"
done
echo "/etc/anneal-agent/agent.env" > "$stage/DEBIAN/conffiles"
doc=$stage/usr/share/doc/anneal-agent
install -D -m 0644 "$root/packaging/debian/copyright" "$doc/copyright"
install -D -m 0644 "$root/packaging/debian/lintian-overrides" "$stage/usr/share/lintian/overrides/anneal-agent"
when=$(date -R -u ${SOURCE_DATE_EPOCH:+-d "@$SOURCE_DATE_EPOCH"})
printf 'anneal-agent (%s) unstable; urgency=medium\n\n  * Built from the Anneal source tree by packaging/build.sh.\n\n -- %s  %s\n' \
    "$version" "$(sed -n 's/^Maintainer: //p' "$root/packaging/debian/control.in")" "$when" | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
size=$(du -sk "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@PYVER@/$pyver/g" \
    "$root/packaging/debian/control.in" > "$stage/DEBIAN/control"

deb=$out/anneal-agent_${version}_${arch}.deb
dpkg-deb --build --root-owner-group "$stage" "$deb" >/dev/null
echo "deb: $deb"
