"""Our agent on documents exactly as Heat writes them: it runs them and signals as Heat expects.

heat-engine cannot run here (it needs Keystone, a message bus and a database of its own),
so a small real aiohttp server stands in for it (tests/support/heat.py): it serves a
Heat-format document (shared/reference/heat.md §2.3: no `anneal` key, no serial, no hash)
the way a Swift TempURL would, and records every signal request. The agent is the real `anneal-agent`
process, configured only by an os-collect-config configuration file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.heat import FakeHeat, run_agent

STACK = "web/9bd57090-8954-48ab-bab9-adf9e1ac70fc"
SERVER = "ec14c864-096e-4e27-bb8a-2c2b4dc6f3f5"


def _derived(name: str, transport: str, extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The deploy_* inputs heat-engine appends, with its descriptions (heat.md §2.2)."""
    return [
        {
            "name": "deploy_server_id",
            "type": "String",
            "description": "ID of the server being deployed to",
            "value": SERVER,
        },
        {
            "name": "deploy_action",
            "type": "String",
            "description": "Name of the current action being deployed",
            "value": "CREATE",
        },
        {
            "name": "deploy_stack_id",
            "type": "String",
            "description": "ID of the stack this deployment belongs to",
            "value": STACK,
        },
        {
            "name": "deploy_resource_name",
            "type": "String",
            "description": "Name of this deployment resource in the stack",
            "value": name,
        },
        {
            "name": "deploy_signal_transport",
            "type": "String",
            "description": "How the server should signal to heat with the deployment output values.",
            "value": transport,
        },
        *extra,
    ]


def heat_document(base: str, marker: Path) -> dict[str, Any]:
    cfn_url = (
        f"{base}/v1/signal/arn%3Aopenstack%3Aheat%3A%3Ate%3Astacks%2F{STACK.replace('/', '%2F')}"
        "%2Fresources%2Fcfn_deployment?Timestamp=2026-11-22T04%3A00%3A00Z&SignatureMethod=HmacSHA256"
        "&AWSAccessKeyId=4f6d&SignatureVersion=2&Signature=abc%3D"
    )
    put_url = f"{base}/v1/AUTH_3f1c/{STACK.split('/')[1]}/web-put_deployment-q2xk7d?temp_url_sig=9a03&temp_url_expires=2147483587"
    script = '#!/bin/sh\necho "hello $foo"\necho -n "$foo-done" > $heat_outputs_path.result\n'
    return {
        "deployments": [
            {
                "id": "3d5ec2a8-7004-43b6-a7f6-542bdbe9d434",
                "name": "10_cfn",
                "group": "script",
                "creation_time": "2026-05-01T10:00:02Z",
                "options": None,
                "config": script,
                "outputs": [{"name": "result", "type": "String", "error_output": False}],
                "inputs": [
                    {"name": "foo", "type": "String", "value": "fooooo"},
                    {
                        "name": "bar",
                        "type": "String",
                        "default": "out.txt",
                        "value": "baaaaa",
                        "replace_on_change": True,
                    },
                    *_derived(
                        "cfn_deployment",
                        "CFN_SIGNAL",
                        [
                            {
                                "name": "deploy_signal_id",
                                "type": "String",
                                "description": "ID of signal to use for signaling output values",
                                "value": cfn_url,
                            },
                            {
                                "name": "deploy_signal_verb",
                                "type": "String",
                                "description": "HTTP verb to use for signaling output values",
                                "value": "POST",
                            },
                        ],
                    ),
                ],
            },
            {
                "id": "8da95794-2ad9-4979-8ae5-739ce314c5cd",
                "name": "20_nosignal",
                "group": "script",
                "creation_time": "2026-05-01T10:00:03Z",
                "options": None,
                "config": f"#!/bin/sh\ntouch {marker}\n",
                "outputs": [],
                "inputs": _derived("quiet_deployment", "NO_SIGNAL", []),
            },
            {
                "id": "5b7c5e0e-8d0e-4bb1-9f0a-0a0c8f1e2d3c",
                "name": "30_put",
                "group": "script",
                "creation_time": "2026-05-01T10:00:04Z",
                "options": None,
                "config": "#!/bin/sh\necho oops >&2\nexit 3\n",
                "outputs": [],
                "inputs": _derived(
                    "put_deployment",
                    "TEMP_URL_SIGNAL",
                    [
                        {
                            "name": "deploy_signal_id",
                            "type": "String",
                            "description": "ID of signal to use for signaling output values",
                            "value": put_url,
                        },
                        {
                            "name": "deploy_signal_verb",
                            "type": "String",
                            "description": "HTTP verb to use for signaling output values",
                            "value": "PUT",
                        },
                    ],
                ),
            },
        ]
    }


async def test_agent_runs_heat_documents_and_signals_in_heats_format(tmp_path: Path) -> None:
    """Under --heat-compat the agent runs Heat's document once per config id and signals in Heat's format."""
    heat = FakeHeat()
    await heat.server.start_server()
    try:
        base = str(heat.server.make_url("")).rstrip("/")
        marker = tmp_path / "no-signal-ran"
        heat.document = heat_document(base, marker)
        # A freshly booted server: the boot metadata (heat_local) names the metadata URL, as
        # Heat's user_data does; the configuration file names only the collectors.
        boot = tmp_path / "cfn-init-data"
        boot.write_text(
            json.dumps(
                {
                    "deployments": [],
                    "os-collect-config": {
                        "collectors": ["heat_local", "request", "local"],
                        "request": {"metadata_url": f"{base}/metadata/doc.json"},
                    },
                }
            )
        )
        local = tmp_path / "local-data"
        local.mkdir(mode=0o700)
        (local / "extra.json").write_text(json.dumps({"site": {"zone": "a"}}))
        conf = tmp_path / "os-collect-config.conf"
        conf.write_text(
            "[DEFAULT]\ncommand = os-refresh-config\ncollectors = heat_local\ncollectors = request\n"
            f"collectors = local\npolling_interval = 30\n\n[heat_local]\npath = {boot}\n\n[local]\npath = {local}\n"
        )
        state = tmp_path / "state"
        hooks = tmp_path / "no-hooks"
        hooks.mkdir()
        common = ["--state-dir", str(state), "--hook-dir", str(hooks)]
        rc, out, err = await run_agent("once", "--heat-compat", "--os-collect-config", str(conf), *common)
        assert rc == 1, err  # the third deployment exits 3: a failure, reported and signalled
        assert [r[0] for r in heat.requests] == ["GET"]
        assert marker.exists()
        by_verb = {s[0]: s for s in heat.signals}
        assert sorted(by_verb) == ["POST", "PUT"] and len(heat.signals) == 2
        post = by_verb["POST"]
        assert (
            post[1].startswith("/v1/signal/arn:openstack:heat::te:stacks/web/")
            and post[3] == "application/json"
        )
        assert post[2] == {
            "result": "fooooo-done",
            "deploy_stdout": "hello fooooo\n",
            "deploy_stderr": "",
            "deploy_status_code": 0,
        }
        put = by_verb["PUT"]
        assert put[1] == f"/v1/AUTH_3f1c/{STACK.split('/')[1]}/web-put_deployment-q2xk7d"
        assert put[2]["deploy_status_code"] == 3 and "oops" in put[2]["deploy_stderr"]
        assert set(put[2]) == {"deploy_stdout", "deploy_stderr", "deploy_status_code"}

        # Unchanged metadata: nothing runs again, nothing is signalled again.
        rc, out, err = await run_agent("once", *common)
        assert rc == 0, err
        assert len(heat.signals) == 2
        # A new derived config id (Heat's next action) runs; the others do not.
        new = dict(heat.document["deployments"][0], id="0c1f3a6e-8a3b-4b8e-9d1e-4c3f2b1a0d9e")
        heat.document = {"deployments": [new, *heat.document["deployments"][1:]]}
        rc, out, err = await run_agent("once", *common)
        assert rc == 0, err
        assert len(heat.signals) == 3 and heat.signals[-1][2]["result"] == "fooooo-done"

        rc, out, err = await run_agent("status", "--json", *common)
        assert rc == 0, err
        status = json.loads(out)
        assert status["mode"] == "heat-compat" and "derived config id" in status["rule"]
        assert status["settings"]["metadata_url"] == f"{base}/metadata/doc.json"
        states = {d["name"]: d["state"] for d in status["deployments"]}
        assert states == {"10_cfn": "signalled", "20_nosignal": "signalled", "30_put": "signalled"}
    finally:
        await heat.server.close()


async def test_bad_os_collect_config_file_is_named(tmp_path: Path) -> None:
    """A bad or missing os-collect-config file stops the agent with exit 2, naming the file and setting."""
    conf = tmp_path / "occ.conf"
    conf.write_text("[DEFAULT]\npolling_interval = soon\n")
    rc, _, err = await run_agent(
        "once", "--heat-compat", "--os-collect-config", str(conf), "--state-dir", str(tmp_path / "s")
    )
    assert rc == 2 and f"{conf}: polling_interval: expected seconds, got 'soon'" in err
    rc, _, err = await run_agent(
        "once",
        "--heat-compat",
        "--os-collect-config",
        str(tmp_path / "missing"),
        "--state-dir",
        str(tmp_path / "s"),
    )
    assert rc == 2 and "missing" in err and "No such file" in err
