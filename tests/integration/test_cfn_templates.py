"""CloudFormation-format templates (AWSTemplateFormatVersion) through the real control plane and local agents.

The template is JSON, as Heat's cfn/ examples are: Parameters, Mappings, Conditions, a script
deployment in CFN form signalling an AWS wait condition handle with curl, Outputs by Fn::GetAtt.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import curl
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")

SCRIPT = """#!/bin/sh
echo "$WHO $deploy_action" >> "$LOG"
printf '%s' "$WHO" > "$heat_outputs_path.said"
[ "$deploy_action" = CREATE ] || exit 0
curl -sf -X PUT -H 'Content-Type: application/json' \\
  --data-binary '{"Status": "SUCCESS", "Reason": "up", "UniqueId": "box", "Data": "'"$WHO"'"}' "$URL"
"""

TEMPLATE: dict[str, Any] = {
    "AWSTemplateFormatVersion": "2010-09-09",
    "Description": "a script deployment written the CloudFormation way",
    "Parameters": {
        "LogFile": {"Type": "String"},
        "Env": {"Type": "String", "Default": "prod", "AllowedValues": ["prod", "dev"]},
        "Words": {"Type": "CommaDelimitedList", "Default": "alpha,beta"},
        "Password": {"Type": "String", "NoEcho": "true", "Default": "pw", "MinLength": "2"},
    },
    "Mappings": {"Sizes": {"prod": {"Label": "large"}, "dev": {"Label": "small"}}},
    "Conditions": {"IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]}, "IsDev": {"Fn::Not": ["IsProd"]}},
    "Resources": {
        "Box": {"Type": "OS::Nova::Server", "Properties": {"image": "cirros", "flavor": "m1.tiny"}},
        "Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"},
        "Step": {
            "Type": "OS::Heat::SoftwareConfig",
            "Properties": {
                "group": "script",
                "inputs": [{"name": "WHO"}, {"name": "LOG"}, {"name": "URL"}],
                "outputs": [{"name": "said"}],
                "config": SCRIPT,
            },
        },
        "Deploy": {
            "Type": "OS::Heat::SoftwareDeployment",
            "DependsOn": "Handle",
            "Properties": {
                "config": {"Ref": "Step"},
                "server": {"Ref": "Box"},
                "actions": ["CREATE", "UPDATE", "DELETE"],
                "input_values": {
                    "WHO": {
                        "Fn::Join": [
                            "-",
                            [
                                {"Fn::FindInMap": ["Sizes", {"Ref": "Env"}, "Label"]},
                                {"Fn::Select": ["1", {"Ref": "Words"}]},
                                {"Fn::If": ["IsProd", "p", "d"]},
                            ],
                        ]
                    },
                    "LOG": {"Ref": "LogFile"},
                    "URL": {"Ref": "Handle"},
                },
            },
        },
        "Wait": {
            "Type": "AWS::CloudFormation::WaitCondition",
            "DependsOn": "Box",
            "Properties": {"Handle": {"Ref": "Handle"}, "Timeout": "60"},
        },
        "DevOnly": {"Type": "OS::Heat::Value", "Condition": "IsDev", "Properties": {"value": "dev"}},
    },
    "Outputs": {
        "Said": {"Value": {"Fn::GetAtt": ["Deploy", "said"]}, "Description": "what the script said"},
        "Data": {"Value": {"Fn::GetAtt": ["Wait", "Data"]}},
        "Where": {"Value": {"Fn::Join": ["/", [{"Ref": "AWS::Region"}, {"Ref": "AWS::StackName"}]]}},
        "Dev": {"Value": {"Fn::GetAtt": ["DevOnly", "value"]}, "Condition": "IsDev"},
    },
}


def _policy(adjustment_type: str, adjustment: str) -> dict[str, Any]:
    return {
        "Type": "AWS::AutoScaling::ScalingPolicy",
        "Properties": {
            "AutoScalingGroupName": {"Ref": "Group"},
            "AdjustmentType": adjustment_type,
            "ScalingAdjustment": adjustment,
            "Cooldown": "0",
        },
    }


SCALING: dict[str, Any] = {
    "AWSTemplateFormatVersion": "2010-09-09",
    "Resources": {
        "Launch": {
            "Type": "AWS::AutoScaling::LaunchConfiguration",
            "Properties": {"ImageId": "cirros", "InstanceType": "m1.small"},
        },
        "Group": {
            "Type": "AWS::AutoScaling::AutoScalingGroup",
            "Properties": {
                "LaunchConfigurationName": {"Ref": "Launch"},
                "MinSize": "1",
                "MaxSize": "3",
                "AvailabilityZones": {"Fn::GetAZs": ""},
            },
        },
        "Up": _policy("ChangeInCapacity", "1"),
        "Full": _policy("ExactCapacity", "3"),
        "Half": _policy("PercentChangeInCapacity", "-50"),
    },
    "Outputs": {
        "Instances": {"Value": {"Fn::GetAtt": ["Group", "InstanceList"]}},
        **{f"{p}Url": {"Value": {"Fn::GetAtt": [p, "AlarmUrl"]}} for p in ("Up", "Full", "Half")},
    },
}


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("cfn"))
    yield plane
    stop_control_plane(plane)


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_a_cfn_json_template_deploys_signals_updates_and_deletes(cp: ControlPlane, tmp_path: Path) -> None:
    """Mappings, Conditions, Fn::If/Select/Join/FindInMap and Ref evaluate as Heat's; the CFN-form
    deployment runs on the server's agent and releases the wait condition by curl; Outputs answer by
    Fn::GetAtt; an update switching the condition runs UPDATE and adds the dev-only resource; delete
    runs DELETE."""
    log = tmp_path / "runs.log"
    text = json.dumps(TEMPLATE, indent=1)
    cp.create_stack("cfn", text, params={"LogFile": str(log)})
    out = cp.outputs("cfn")
    assert {"Said": "large-beta-p", "Where": "ap-southeast-1/cfn", "Dev": None} == {
        k: out.get(k) for k in ("Said", "Where", "Dev")
    }
    assert {"box": "large-beta-p"} == json.loads(out["Data"])
    assert ["large-beta-p CREATE"] == _lines(log)
    shown = cp.api("GET", "/v1/stacks/cfn").body
    assert "******" == shown["parameters"]["Password"], shown["parameters"]

    cp.update_stack("cfn", text, {"LogFile": str(log), "Env": "dev"})
    assert {"Said": "small-beta-d", "Dev": "dev"} == {k: cp.outputs("cfn")[k] for k in ("Said", "Dev")}
    names = {r["name"] for r in cp.api("GET", "/v1/stacks/cfn/resources").body}
    assert "DevOnly" in names
    cp.delete_stack("cfn")
    assert ["large-beta-p CREATE", "small-beta-d UPDATE", "small-beta-d DELETE"] == _lines(log)


def _bad(change: dict[str, Any]) -> str:
    return json.dumps({**TEMPLATE, **change})


def test_bad_cfn_input_is_refused_naming_the_cfn_path(cp: ControlPlane) -> None:
    """An unknown resource key, a property the type lacks, a parameter outside AllowedValues, an
    unknown mapping, Fn::If in a HeatTemplateFormatVersion template and a function Heat lacks are
    400s naming the place as the CFN template spells it; nothing is created."""
    resources = TEMPLATE["Resources"]
    deploy = resources["Deploy"]
    heat_format = {k: v for k, v in TEMPLATE.items() if k not in ("AWSTemplateFormatVersion", "Conditions")}
    unconditional = {k: {**v, "Condition": None} if "Condition" in v else v for k, v in resources.items()}
    cases = {
        "Resources.Box.Propertys": _bad(
            {"Resources": {**resources, "Box": {"Type": "OS::Nova::Server", "Propertys": {}}}}
        ),
        "Resources.Deploy.Properties.nope": _bad(
            {
                "Resources": {
                    **resources,
                    "Deploy": {**deploy, "Properties": {**deploy["Properties"], "nope": 1}},
                }
            }
        ),
        "Resources.Deploy.Properties.input_values.WHO.Fn::Join[1][0].Fn::FindInMap": _bad(
            {"Mappings": {"Other": {"prod": {"Label": "x"}}}}
        ),
        "Outputs.Said.Value": _bad({"Outputs": {"Said": {"Value": {"Fn::Sub": "${AWS::Region}"}}}}),
        "Resources.Deploy.Properties.input_values.WHO.": json.dumps(
            {
                **heat_format,
                "HeatTemplateFormatVersion": "2012-12-12",
                "Resources": {k: v for k, v in unconditional.items() if k != "DevOnly"},
                "Outputs": {},
            }
        ),
    }
    for path, template in cases.items():
        resp = cp.create("refused", template, params={"LogFile": "/dev/null"})
        assert 400 == resp.status, resp.body
        assert path in str(resp.body), (path, resp.body)
    resp = cp.create("refused", json.dumps(TEMPLATE), params={"LogFile": "/dev/null", "Env": "test"})
    assert 400 == resp.status and "Env" in str(resp.body), resp.body
    assert 404 == cp.api("GET", "/v1/stacks/refused").status


def _size(cp: ControlPlane, size: int) -> dict[str, Any]:
    """Wait until the group is COMPLETE at *size* members; the stack's outputs."""

    def settled() -> dict[str, Any] | None:
        group = next(r for r in cp.api("GET", "/v1/stacks/aws/resources").body if r["name"] == "Group")
        out = cp.outputs("aws")
        ready = not group["status"].endswith("IN_PROGRESS") and out["Instances"].count(",") + 1 == size
        return out if ready else None

    return wait_until(settled, f"group not at {size} members; log: {cp.log}", 120)


def test_aws_scaling_policies_resize_an_aws_scaling_group_by_their_alarm_urls(cp: ControlPlane) -> None:
    """The group starts at MinSize; curl on a policy's AlarmUrl adjusts it by ChangeInCapacity,
    ExactCapacity and PercentChangeInCapacity within MinSize..MaxSize, each member a server with
    its own agent (InstanceList lists their addresses); a new launch configuration replaces the
    members, keeping the size."""
    cp.create_stack("aws", json.dumps(SCALING))
    out = _size(cp, 1)
    assert all(out["Instances"].split(","))
    assert "scaling from 1 to 2" in curl.post(out["UpUrl"])["result"]
    _size(cp, 2)
    assert "scaling from 2 to 3" in curl.post(out["FullUrl"])["result"]
    _size(cp, 3)
    assert "stays at 3" in curl.post(out["UpUrl"])["result"]
    assert "scaling from 3 to 2" in curl.post(out["HalfUrl"])["result"]
    _size(cp, 2)
    group = next(r for r in cp.api("GET", "/v1/stacks/aws/resources").body if r["name"] == "Group")
    members = cp.api("GET", f"/v1/stacks/{group['physical_id']}/resources").body
    assert 2 == len(members) and {"OS::Nova::Server"} == {m["type"] for m in members}

    launch = SCALING["Resources"]["Launch"]
    rolled = {
        **SCALING["Resources"],
        "Launch": {**launch, "Properties": {**launch["Properties"], "ImageId": "f"}},
    }
    cp.update_stack("aws", json.dumps({**SCALING, "Resources": rolled}))
    replaced = cp.api("GET", f"/v1/stacks/{group['physical_id']}/resources").body
    assert 2 == len(replaced) and not {m["name"] for m in members} & {m["name"] for m in replaced}
    cp.delete_stack("aws")


CHILD: dict[str, Any] = {
    "AWSTemplateFormatVersion": "2010-09-09",
    "Parameters": {"Server": {"Type": "String"}, "Host": {"Type": "String"}},
    "Resources": {
        "Say": {
            "Type": "OS::Heat::SoftwareConfig",
            "Properties": {
                "group": "script",
                "inputs": [{"name": "HOST"}],
                "outputs": [{"name": "said"}],
                "config": '#!/bin/sh\nprintf "seen %s" "$HOST" > "$heat_outputs_path.said"\n',
            },
        },
        "Run": {
            "Type": "OS::Heat::SoftwareDeployment",
            "Properties": {
                "config": {"Ref": "Say"},
                "server": {"Ref": "Server"},
                "input_values": {"HOST": {"Ref": "Host"}},
            },
        },
    },
    "Outputs": {"Said": {"Value": {"Fn::GetAtt": ["Run", "said"]}}},
}

INSTANCE: dict[str, Any] = {
    "AWSTemplateFormatVersion": "2010-09-09",
    "Resources": {
        "Box": {
            "Type": "AWS::EC2::Instance",
            "Properties": {
                "ImageId": "F20-x86_64-cfntools",
                "InstanceType": "m1.small",
                "AvailabilityZone": "az-one",
                "UserData": {"Fn::Base64": "#!/bin/sh\necho booted\n"},
            },
        },
        "Peer": {"Type": "OS::Nova::Server"},
        "Inner": {
            "Type": "AWS::CloudFormation::Stack",
            "Properties": {
                "TemplateURL": "child.template",
                "Parameters": {"Server": {"Ref": "Box"}, "Host": {"Fn::GetAtt": ["Box", "PrivateIp"]}},
                "TimeoutInMinutes": "5",
            },
        },
    },
    "Outputs": {
        "Said": {"Value": {"Fn::GetAtt": ["Inner", "Outputs.Said"]}},
        **{a: {"Value": {"Fn::GetAtt": ["Box", a]}} for a in ("PrivateIp", "PublicIp", "PrivateDnsName")},
        "PublicDnsName": {"Value": {"Fn::GetAtt": ["Box", "PublicDnsName"]}},
        "Zone": {"Value": {"Fn::GetAtt": ["Box", "AvailabilityZone"]}},
        "Peer": {"Value": {"Fn::GetAtt": ["Peer", "first_address"]}},
        "Arn": {"Value": {"Ref": "AWS::StackId"}},
    },
}


def test_an_ec2_instance_and_a_cloudformation_stack_run_as_heats(cp: ControlPlane) -> None:
    """AWS::EC2::Instance is a server with an agent (compute properties warned about, its address
    attributes from the agent's report); AWS::CloudFormation::Stack nests the file TemplateURL names,
    with Parameters and TimeoutInMinutes, its outputs read as Outputs.NAME; Ref AWS::StackId is Heat's ARN."""
    stack = cp.create_stack(
        "ec2", json.dumps(INSTANCE), files={"child.template": json.dumps(CHILD)}, timeout=180
    )
    out = cp.outputs("ec2")
    first = out["Peer"] or "0.0.0.0"  # every local agent reports this machine's addresses
    assert [first] * 4 == [out[a] for a in ("PrivateIp", "PublicIp", "PrivateDnsName", "PublicDnsName")]
    assert (f"seen {first}", "az-one") == (out["Said"], out["Zone"])
    assert f"arn:openstack:heat::default:stacks/ec2/{stack['id']}" == out["Arn"]
    warned = [e["reason"] for e in cp.api("GET", "/v1/stacks/ec2/events").body if e["status"] == "WARNING"]
    for prop in ("ImageId", "InstanceType", "AvailabilityZone", "UserData"):
        assert any(f"Resources.Box.Properties.{prop}" in w for w in warned), (prop, warned)
    (nested,) = [s for s in cp.api("GET", "/v1/stacks?nested=true").body if s["parent"] == stack["id"]]
    assert ("Inner", 5) == (nested["parent_resource"], nested["timeout_mins"])
    types = {r["name"]: r["type"] for r in cp.api("GET", "/v1/stacks/ec2/resources").body}
    assert ("AWS::EC2::Instance", "AWS::CloudFormation::Stack") == (types["Box"], types["Inner"])
    cp.delete_stack("ec2")


def test_a_template_url_not_given_and_a_hot_function_in_cfn_are_refused_naming_the_path(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A TemplateURL that names no file given (a web URL: nothing is fetched) and get_param in an
    AWSTemplateFormatVersion template are 400s naming the CFN path and what to do; nothing is created.
    The CLI sends the file a local TemplateURL names, as it does a template resource's type."""
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "child.template").write_text(json.dumps(CHILD))
    local = json.loads(json.dumps(INSTANCE))
    local["Resources"]["Inner"]["Properties"]["TemplateURL"] = "nested/child.template"
    (tmp_path / "top.template").write_text(json.dumps(local))
    checked = cp.cli("template", "validate", str(tmp_path / "top.template"))
    assert 0 == checked.returncode, checked.stderr
    (tmp_path / "nested" / "child.template").write_text(json.dumps({**CHILD, "Outputs": {"Said": {}}}))
    checked = cp.cli("template", "validate", str(tmp_path / "top.template"))
    assert 1 == checked.returncode and "Resources.Inner.Properties.TemplateURL" in checked.stderr, checked
    remote = json.loads(json.dumps(INSTANCE))
    remote["Resources"]["Inner"]["Properties"]["TemplateURL"] = "https://example.invalid/child.template"
    resp = cp.create("refused", json.dumps(remote), files={"child.template": json.dumps(CHILD)})
    assert 400 == resp.status and "Resources.Inner.Properties.TemplateURL" in str(resp.body), resp.body
    assert "fetches no URL" in str(resp.body)
    hot_call = json.loads(json.dumps(CHILD))
    hot_call["Resources"]["Run"]["Properties"]["input_values"]["HOST"] = {"get_param": "Host"}
    resp = cp.create("refused", json.dumps(hot_call), params={"Server": "x", "Host": "y"})
    assert 400 == resp.status, resp.body
    assert "Resources.Run.Properties.input_values.HOST.get_param" in str(resp.body)
    assert "write Ref" in str(resp.body)
    assert 404 == cp.api("GET", "/v1/stacks/refused").status
