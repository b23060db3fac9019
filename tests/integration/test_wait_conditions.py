"""Wait conditions as Heat templates write them, released by real script deployments running curl.

Local agents run the scripts; each script signals the handle with the line Heat users
write: `str_replace` of `wc_notify` by the handle's `curl_cli`, then
`--data-binary '{"status": "SUCCESS"}'`. Nothing here fakes a signal.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")

RELEASED = """
heat_template_version: 2018-08-31
parameters:
  count: {type: number, default: 3}
  timeout: {type: number, default: 120}
  signallers: {type: comma_delimited_list, default: "one,two,three"}
resources:
  handle: {type: OS::Heat::WaitConditionHandle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: {get_param: count}, timeout: {get_param: timeout}}
  box: {type: OS::Heat::DeployedServer}
  notify:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config:
        str_replace:
          template: |
            #!/bin/sh
            set -e
            who=$deploy_resource_name
            wc_notify --data-binary "{\\"status\\": \\"SUCCESS\\", \\"id\\": \\"$who\\", \\"data\\": \\"hello from $who\\"}"
          params:
            wc_notify: {get_attr: [handle, curl_cli]}
  signal:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: notify}
      servers:
        map_merge: {repeat: {for_each: {"%who%": {get_param: signallers}}, template: {"%who%": {get_resource: box}}}}
  after:
    type: OS::Heat::Value
    depends_on: wait
    properties: {value: {get_attr: [wait, data]}}
outputs:
  data: {value: {get_attr: [wait, data]}}
  after: {value: {get_attr: [after, value]}}
"""


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("waits"))
    yield plane
    stop_control_plane(plane)


def test_count_three_released_by_three_curl_cli_deployments(cp: ControlPlane) -> None:
    """Three deployments signal the handle with curl_cli; the wait completes and its data has all three."""
    cp.create_stack("released", RELEASED, timeout=180)
    data = json.loads(cp.outputs("released")["data"])
    assert data == {"one": "hello from one", "two": "hello from two", "three": "hello from three"}
    assert json.loads(cp.outputs("released")["after"]) == data  # its dependents ran after it
    events = cp.api("GET", "/v1/stacks/released/events").body
    signals = [e for e in events if e["resource_name"] == "handle" and e["action"] == "SIGNAL"]
    assert len(signals) == 3


def test_a_wait_that_times_out_fails_the_stack_with_the_reason(cp: ControlPlane) -> None:
    """count 2, one signaller (done before the wait starts), 5 s: CREATE_FAILED, the reason says 1 of 2."""
    template = RELEASED.replace("  wait:\n", "  wait:\n    depends_on: signal\n")
    assert template != RELEASED
    resp = cp.create("timesout", template, params={"count": "2", "timeout": "5", "signallers": "only"})
    assert resp.status == 201, resp.body
    stack = cp.settled("timesout", "CREATE_FAILED", timeout=120)
    assert "WaitConditionTimeout: 1 of 2 received in 5 s" in stack["status_reason"], stack
    wait = next(r for r in cp.api("GET", "/v1/stacks/timesout/resources").body if r["name"] == "wait")
    assert wait["status"] == "CREATE_FAILED" and "1 of 2 received" in wait["status_reason"]


def test_a_failure_signal_fails_the_wait_with_its_reason(cp: ControlPlane) -> None:
    """A FAILURE signal fails the wait at once, with the reason the script gave."""
    template = RELEASED.replace(
        '\\"status\\": \\"SUCCESS\\", \\"id\\": \\"$who\\"',
        '\\"status\\": \\"FAILURE\\", \\"reason\\": \\"disk full on $who\\"',
    )
    assert template != RELEASED
    resp = cp.create("fails", template, params={"signallers": "only"})
    assert resp.status == 201, resp.body
    stack = cp.settled("fails", "CREATE_FAILED", timeout=120)
    assert "WaitConditionFailure: disk full on only" in stack["status_reason"], stack


AWS = """
heat_template_version: 2018-08-31
resources:
  handle: {type: AWS::CloudFormation::WaitConditionHandle}
  wait:
    type: AWS::CloudFormation::WaitCondition
    properties: {Handle: {get_resource: handle}, Timeout: 120, Count: 1}
  box: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: URL}]
      config: |
        #!/bin/sh
        set -e
        curl -sf -X PUT -H 'Content-Type: application/json' \\
          --data-binary '{"Status": "SUCCESS", "Reason": "up", "UniqueId": "web", "Data": "42"}' "$URL"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: box},
                 input_values: {URL: {get_resource: handle}}}
outputs:
  data: {value: {get_attr: [wait, Data]}}
  url: {value: {get_resource: handle}}
"""


def test_aws_handle_is_its_presigned_url_and_dies_with_the_stack(cp: ControlPlane) -> None:
    """get_resource on an AWS handle is a pre-signed URL taking {Status, Reason, UniqueId, Data}; gone after delete."""
    cp.create_stack("aws", AWS, timeout=180)
    outputs = cp.outputs("aws")
    assert json.loads(outputs["data"]) == {"web": "42"}
    url = outputs["url"]
    assert url.startswith(f"{cp.url}/v1/heat/waitcondition/") and "sig=" in url
    path = url[len(cp.url) :]
    bad = cp.api("PUT", path, {"Status": "SUCCESS"}, token=None)
    assert bad.status == 400 and bad.body["error"]["where"] in ("Reason", "UniqueId", "Data")
    forged = path.rsplit("sig=", 1)[0] + "sig=" + "0" * 64
    assert cp.api("PUT", forged, {}, token=None).status == 403
    cp.delete_stack("aws")
    body = {"Status": "SUCCESS", "Reason": "late", "UniqueId": "x", "Data": ""}
    assert cp.api("PUT", path, body, token=None).status == 410
