"""`anneal template validate` refuses what the API refuses, with the API's error, offline."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from control import hot
from tests.support.bad_input import CASES, GOOD
from tests.support.controlplane import ControlPlane
from tests.support.processes import command

#: Beyond CASES: a template over the default 512 KiB cap, and an environment mapping a type.
OVERSIZE = GOOD + "\ndescription: " + "x" * (600 * 1024) + "\n"
REGISTRY = "resource_registry:\n  OS::Neutron::SecurityGroup: OS::Heat::None\n"


def validate(
    tmp: Path, template: str, params: dict[str, str], files: dict[str, str], envs: tuple[str, ...] = ()
) -> tuple[int, Any]:
    """Run the installed `anneal template validate -f json` with no control plane configured."""
    tmp.mkdir()
    (tmp / "t.yaml").write_text(template)
    for name, text in files.items():
        (tmp / name).write_text(text)
    argv = [command("anneal"), "template", "validate", str(tmp / "t.yaml"), "-f", "json"]
    for i, text in enumerate(envs):
        (tmp / f"env{i}.yaml").write_text(text)
        argv += ["-e", str(tmp / f"env{i}.yaml")]
    argv += [x for k, v in params.items() for x in ("-P", f"{k}={v}")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANNEAL_")}
    env["ANNEAL_CONFIG"] = "/nonexistent"
    done = subprocess.run(argv, env=env, text=True, capture_output=True, timeout=120, check=False, cwd=tmp)
    return done.returncode, json.loads(done.stdout)


def test_every_bad_input_case_gets_the_apis_error_offline(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """For each bad request the API refuses, validate exits 1 with the same code, message and path."""
    cases = {**CASES, "oversize": (OVERSIZE, {}, {}, "template")}
    for case, (template, params, files, where) in sorted(cases.items()):
        api = control_plane.create(f"s-{case.replace('_', '-')}", template, params=params, files=files)
        assert 400 == api.status, (case, api.body)
        status, offline = validate(tmp_path / case, template, params, files)
        assert (1, api.body) == (status, offline), case
        assert where in f"{offline['error']['where']} {offline['error']['message']}", case
    assert [] == control_plane.api("GET", "/v1/stacks").body


def test_a_good_template_passes_offline_and_is_accepted_by_the_api(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Exit 0 and a summary (resources, parameters, outputs) for what the API then creates."""
    template = GOOD + "  sg: {type: OS::Neutron::SecurityGroup}\n"
    status, found = validate(tmp_path / "good", template, {"port": "8080"}, {}, (REGISTRY,))
    assert 0 == status
    assert {"srv", "cfg", "dep", "sg"} == {r["resource"] for r in found["resources"]}
    assert ({"port": 8080}, ["o"]) == (found["parameters"], found["outputs"])
    assert (
        201 == control_plane.create("good", template, params={"port": "8080"}, environments=[REGISTRY]).status
    )


def test_get_file_next_to_the_template_is_read(tmp_path: Path) -> None:
    """A get_file beside the template is read as `stack create` sends it; a missing one is the API's error."""
    template = GOOD.replace('config: "#!/bin/sh\\n"', "config: {get_file: run.sh}")
    assert 0 == validate(tmp_path / "with", template, {}, {"run.sh": "#!/bin/sh\n"})[0]
    status, error = validate(tmp_path / "without", template, {}, {})
    assert 1 == status and "run.sh" in error["error"]["message"]


def test_the_library_raises_the_same_paths() -> None:
    """`control.hot.validate` raises TemplateError naming each case's path; what the API warns of, it warns of."""
    for case, (template, params, files, where) in sorted(CASES.items()):
        try:
            hot.validate(template, files=files, parameters=params)
        except hot.TemplateError as e:
            assert where in f"{e.path} {e}", case
        else:
            raise AssertionError(f"{case}: no error")
    assert () == hot.validate(GOOD).warnings
    (warning,) = hot.validate(GOOD.replace("get_attr: [dep, out]", "get_attr: [dep, nothere]")).warnings
    assert warning.startswith("outputs.o.value: resource 'dep' has no attribute 'nothere'")


def test_table_output_names_the_file_and_exits_non_zero(tmp_path: Path) -> None:
    """The default output is one line on stderr naming the file and the path, exit 1."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("2018-08-31", "2099-01-01"))
    done = subprocess.run(
        [command("anneal"), "template", "validate", str(bad)],
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert 1 == done.returncode
    assert f"{bad}: heat_template_version" in done.stderr


NESTED_TOP = (
    "heat_template_version: 2018-08-31\nresources:\n  child: {type: child.yaml, properties: {port: 70000}}\n"
)
NESTED_CHILD = """heat_template_version: 2018-08-31
parameters:
  port: {type: number, constraints: [{range: {min: 1, max: 65535}}]}
resources:
  n: {type: OS::Heat::None}
"""


def test_a_nested_templates_error_is_the_apis(control_plane: ControlPlane, tmp_path: Path) -> None:
    """A template resource's bad property: the nested file is read beside the template, the error is the API's."""
    api = control_plane.create("nested", NESTED_TOP, files={"child.yaml": NESTED_CHILD})
    assert 400 == api.status, api.body
    status, offline = validate(tmp_path / "nested", NESTED_TOP, {}, {"child.yaml": NESTED_CHILD})
    assert (1, api.body) == (status, offline)
    assert "resources.child.properties.port" == offline["error"]["where"]


KIB = "k" * 1024
#: case -> (template, parameters, files): each over a bound the API enforces.
BOUNDED: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    # 300 copies of a placeholder spliced 1,000 times: 300 MB from a 3 KB template
    "budget": (
        json.dumps(
            {
                "heat_template_version": "2018-08-31",
                "parameters": {"kb": {"type": "string", "default": KIB}},
                "resources": {
                    "bomb": {
                        "type": "OS::Heat::Value",
                        "properties": {
                            "value": {
                                "repeat": {
                                    "for_each": {"%i%": [{"get_param": "kb"}] * 300},
                                    "template": "%i%" * 1000,
                                }
                            }
                        },
                    }
                },
            }
        ),
        {},
        {},
    ),
    "pattern": (
        'heat_template_version: 2018-08-31\nparameters:\n  w: {type: string, constraints: [{allowed_pattern: "(a|a)+"}]}\n',
        {"w": "a" * 29 + "!"},
        {},
    ),
    "yaql": (
        "heat_template_version: 2018-08-31\nresources:\n  slow:\n    type: OS::Heat::Value\n    properties:\n"
        '      value: {yaql: {expression: "let(x => range(150).toList()) -> $x.join($x, true, [$1, $2]).len()"}}\n',
        {},
        {},
    ),
    # a nested server named by a function "a b": only a dry run of the nested template sees it
    "nested": (
        "heat_template_version: 2018-08-31\nresources:\n  nest: {type: bomb.yaml}\n",
        {},
        {
            "bomb.yaml": "heat_template_version: 2018-08-31\nresources:\n  srv:\n    type: OS::Heat::DeployedServer\n"
            "    properties: {name: {list_join: [' ', [a, b]]}}\n"
        },
    ),
}


def test_the_apis_bounds_are_enforced_offline_with_its_errors(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Evaluation budget, pattern time, yaql time and a nested template's dry run: offline, the API's error body."""
    for case, (template, params, files) in BOUNDED.items():
        api = control_plane.create(f"b-{case}", template, params=params, files=files)
        assert 400 == api.status, (case, api.body)
        status, offline = validate(tmp_path / case, template, params, files)
        assert (1, api.body) == (status, offline), case
    assert [] == control_plane.api("GET", "/v1/stacks").body
