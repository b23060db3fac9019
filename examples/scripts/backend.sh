#!/bin/sh
# Backend: CREATE/UPDATE (re)start a tiny HTTP service on a free loopback port;
# DELETE stops it. Inputs: VERSION, MESSAGE. Output: host_and_port.
set -eu
dir="$PWD/backend-$VERSION"
stop() {
    if [ -f "$dir/pid" ]; then
        kill "$(cat "$dir/pid")" 2>/dev/null || true
        rm -f "$dir/pid"
    fi
}
case "$deploy_action" in
  CREATE|UPDATE)
    stop
    mkdir -p "$dir/www"
    printf '%s (%s)\n' "$MESSAGE" "$VERSION" > "$dir/www/index.html"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    nohup python3 -m http.server "$port" --bind 127.0.0.1 --directory "$dir/www" \
        >"$dir/server.log" 2>&1 </dev/null &
    echo $! > "$dir/pid"
    python3 - "$port" <<'PY'
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=1).read()
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit("backend did not start")
PY
    printf '127.0.0.1:%s' "$port" > "$heat_outputs_path.host_and_port"
    echo "backend $VERSION serving on 127.0.0.1:$port"
    ;;
  DELETE)
    stop
    echo "backend $VERSION stopped"
    ;;
esac
