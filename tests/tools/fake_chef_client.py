#!/usr/bin/env python3
"""A FAKE chef-client for tests: no Chef client can be installed on these machines (env.md §4).

It says it is one (``--version``), records its argv, client.rb and node JSON to the file named
by $FAKE_CHEF_RECORD (one JSON line per run), and acts on node attributes the tests set:
``fake_outputs`` ({name: value} written to $heat_outputs_path.<name>; $FAKE_CHEF_OUTPUTS, a
JSON map, adds more), ``fake_sleep`` (seconds, with its pid written to ``fake_pidfile``) and
``fake_exit`` (its exit status).
"""

import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print("Chef Infra Client: 18.0.0 (fake, for tests)")
        return 0
    config = argv[argv.index("--config") + 1]
    node_file = argv[argv.index("-j") + 1]
    with open(node_file) as f:
        node = json.load(f)
    with open(config) as f:
        client_rb = f.read()
    with open(os.environ["FAKE_CHEF_RECORD"], "a") as f:
        f.write(
            json.dumps(
                {
                    "argv": argv,
                    "client_rb": client_rb,
                    "node": node,
                    "deploy_action": os.environ.get("deploy_action"),  # noqa: SIM112 (Heat sets it lower-case)
                }
            )
            + "\n"
        )
    print(f"Starting Chef Infra Client, run list {node.get('run_list')}", flush=True)
    outputs = {**json.loads(os.environ.get("FAKE_CHEF_OUTPUTS") or "{}"), **(node.get("fake_outputs") or {})}
    for name, value in outputs.items():
        with open(f"{os.environ['heat_outputs_path']}.{name}", "w") as f:  # noqa: SIM112 (Heat's name)
            f.write(value)
    if node.get("fake_sleep"):
        with open(node["fake_pidfile"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(float(node["fake_sleep"]))
    code = int(node.get("fake_exit", 0))
    if code:
        print("Chef Infra Client failed. 1 resources updated", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
