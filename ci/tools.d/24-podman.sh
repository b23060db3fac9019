#!/usr/bin/env bash
# podman and podman-compose from Debian for the docker-compose hook's tests; runc (crun, podman's
# default, refuses the hybrid cgroup layout of containers like this one); and busybox-static,
# whose one binary becomes the root filesystem of the test image (built locally from a
# tarball with `podman import`: no registry is ever contacted).
set -euo pipefail
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v podman-compose >/dev/null 2>&1 || missing+=(podman-compose)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /bin/busybox ] || missing+=(busybox-static)
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "${missing[@]}"
fi
echo "podman $(podman --version | awk '{print $3}') at $(command -v podman);" \
    "podman-compose at $(command -v podman-compose); runc at $(command -v runc); busybox at /bin/busybox"
