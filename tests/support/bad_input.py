"""The bad stack requests the suite checks: the API refuses each (test_bad_input.py), and
`anneal template validate` refuses each with the same error (test_template_validate.py)."""

from __future__ import annotations

GOOD = """
heat_template_version: 2018-08-31
parameters:
  port: {type: number, default: 80, constraints: [{range: {min: 1, max: 65535}}]}
outputs:
  o: {value: {get_attr: [dep, out]}}
resources:
  srv: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\\n", outputs: [{name: out}]}
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: srv}}
"""

#: GOOD with a ResourceGroup of two deployments, its update_policy to follow.
GROUP = (
    GOOD
    + """  fleet:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: OS::Heat::SoftwareDeployment
        properties: {config: {get_resource: cfg}, server: {get_resource: srv}}
"""
)

#: case -> (template, parameters, files, where the error must point). A get_attr of an output a
#: deployment's config does not declare is a warning (Heat accepts it) and every Heat signal
#: transport is accepted, so those cases use a SoftwareConfig's attribute and a made-up transport.
CASES: dict[str, tuple[str, dict[str, str], dict[str, str], str]] = {
    "malformed_yaml": (GOOD + "\n  broken: [unclosed\n", {}, {}, "template"),
    "unknown_parameter": (GOOD, {"nope": "1"}, {}, "parameters.nope"),
    "mistyped_parameter": (GOOD, {"port": "eighty"}, {}, "parameters.port"),
    "constraint": (GOOD, {"port": "70000"}, {}, "parameters.port"),
    "missing_get_file": (
        GOOD.replace('config: "#!/bin/sh\\n"', "config: {get_file: gone.sh}"),
        {},
        {},
        "get_file",
    ),
    "cycle": (
        GOOD + "  x: {type: OS::Heat::None, depends_on: y}\n  y: {type: OS::Heat::None, depends_on: x}\n",
        {},
        {},
        "cycle",
    ),
    "unknown_attribute": (
        GOOD.replace("get_attr: [dep, out]", "get_attr: [cfg, nothere]"),
        {},
        {},
        "outputs.o",
    ),
    "unknown_attribute_target": (
        GOOD.replace("get_attr: [dep, out]", "get_attr: [ghost, out]"),
        {},
        {},
        "ghost",
    ),
    "unsupported_type": (GOOD + "  sg: {type: OS::Neutron::SecurityGroup}\n", {}, {}, "resources.sg.type"),
    "unsupported_signal": (  # every transport Heat has is accepted (docs/templates.md); not others
        GOOD.replace(
            "server: {get_resource: srv}}", "server: {get_resource: srv}, signal_transport: PIGEON_SIGNAL}"
        ),
        {},
        {},
        "signal_transport",
    ),
    "bad_version": (GOOD.replace("2018-08-31", "2099-01-01"), {}, {}, "heat_template_version"),
    "bad_canary": (
        GROUP + "    update_policy: {canary: {count: 2, percent: 20}}\n",
        {},
        {},
        "update_policy.canary",
    ),
    "bad_on_failure": (
        GROUP + "    update_policy: {on_failure: retry}\n",
        {},
        {},
        "update_policy.on_failure",
    ),
}
