#!/usr/bin/env bash
# cloud-init's own schema check (`cloud-init schema`) for packaging/cloud-init/user-data.yaml.
# Debian's cloud-init package is downloaded and unpacked, never installed: installing it would
# add cloud-init's systemd units to this machine. It runs from .venv/tools/cloud-init with the
# few libraries the schema command imports, in a virtualenv of its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$PWD/.venv/tools/cloud-init
if ! "$dir/bin/cloud-init" --version >/dev/null 2>&1; then
    rm -rf "$dir" && mkdir -p "$dir/bin"
    apt-get -o DPkg::Lock::Timeout=600 update -qq || true
    (cd "$dir" && apt-get -o DPkg::Lock::Timeout=600 download cloud-init 2>&1 | grep -v "unsandboxed" || true)
    dpkg-deb -x "$dir"/cloud-init_*.deb "$dir/root"
    rm -f "$dir"/cloud-init_*.deb
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install -q --disable-pip-version-check jsonschema pyyaml configobj jinja2 \
        jsonpatch requests 2> >(grep -v "^WARNING: Location" >&2)
    cat > "$dir/bin/cloud-init" <<'WRAPPER'
#!/bin/sh
dir=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH=$dir/root/usr/lib/python3/dist-packages exec "$dir/venv/bin/python" -c \
    'import sys; sys.argv[0] = "cloud-init"; from cloudinit.cmd.main import main; sys.exit(main())' "$@"
WRAPPER
    chmod 0755 "$dir/bin/cloud-init"
fi
echo "cloud-init $("$dir/bin/cloud-init" --version 2>&1 | awk '{print $2}') in $dir (schema check only)"
