#!/bin/sh
# Frontend: point at BACKEND_ADDR and check the backend answers there.
# Outputs: upstream (the address used) and backend_reply (what it served).
set -eu
retries=$(python3 -c 'import json, os; print(json.loads(os.environ["SETTINGS"]).get("retries", 20))')
reply=$(python3 - "$BACKEND_ADDR" "$retries" <<'PY'
import sys, time, urllib.request
addr, retries = sys.argv[1], int(sys.argv[2])
for _ in range(retries):
    try:
        print(urllib.request.urlopen(f"http://{addr}/", timeout=2).read().decode().strip())
        break
    except OSError as e:
        err = e
        time.sleep(0.25)
else:
    sys.exit(f"backend at {addr} is not reachable: {err}")
PY
)
printf '%s' "$BACKEND_ADDR" > "$heat_outputs_path.upstream"
printf '%s' "$reply" > "$heat_outputs_path.backend_reply"
echo "frontend $FRONTEND_VERSION points at $BACKEND_ADDR, which says: $reply"
