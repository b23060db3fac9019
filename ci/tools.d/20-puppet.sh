#!/usr/bin/env bash
# Puppet for the puppet hook's tests: Debian's puppet 7 (ruby + facter), and a facter.conf
# that turns off the resolvers that fail in containers (they print permission errors on
# every run). Debian's facter 4 reads /etc/facter/facter.conf.
set -euo pipefail
if ! command -v puppet >/dev/null 2>&1; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends puppet
fi
conf=/etc/facter/facter.conf
want='facts : { blocklist : [ "virtualization", "hypervisors", "uptime", "EC2", "GCE", "az_metadata" ] }'
if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
    mkdir -p /etc/facter
    printf '%s\n' "$want" > "$conf"
fi
echo "puppet $(puppet --version) at $(command -v puppet); facter config $conf"
