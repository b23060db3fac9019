#!/usr/bin/env bash
# Debian's headless-capable Chromium, driven over the DevTools protocol by tests/integration/test_ui_browser.py.
# fonts-liberation gives the screenshots in docs/ui/ readable text (Chromium only recommends it).
set -euo pipefail
if ! command -v chromium >/dev/null || ! fc-list 2>/dev/null | grep -qi liberation; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
        chromium fonts-liberation
fi
echo "$(chromium --version 2>/dev/null) at $(command -v chromium)"
