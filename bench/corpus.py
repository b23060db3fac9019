"""Heat's public templates through `anneal template validate`: how many a stack create would take.

    git clone https://opendev.org/openstack/heat-templates /tmp/heat-templates
    .venv/bin/python bench/corpus.py /tmp/heat-templates/hot
    .venv/bin/python bench/corpus.py /tmp/heat-templates/cfn

Every ``*.yaml`` with a ``heat_template_version`` below the folder (and every ``*.yaml``,
``*.template`` or ``*.json`` with an ``AWSTemplateFormatVersion`` or
``HeatTemplateFormatVersion``: CloudFormation-format ones) is checked by the real CLI,
offline (the checks `POST /v1/stacks` runs, get_file and nested templates read from beside
it), twice:

* **as written**, with ``<name>_env.yaml`` or ``<name>-env.yaml`` beside it if there is one;
* **with the other services stubbed**: an extra environment maps the resource types of the
  OpenStack services Anneal does not replace (Neutron, Cinder, Keystone, Octavia, ...) to
  ``OS::Heat::None``, the documented way to run such a template here (docs/templates.md,
  "Templates that also build infrastructure").

Parameters without a default get a value of their type (the first of ``allowed_values`` if
listed), as the user would pass with ``-P``. The baseline is Heat itself, which takes the
whole corpus (it is Heat's own); each refusal is printed with its first line, grouped by cause.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
ANNEAL = ROOT / ".venv" / "bin" / "anneal"
#: The services whose resources the stub environment maps to OS::Heat::None.
STUBBED = (
    "OS::Neutron::*",
    "OS::Cinder::*",
    "OS::Keystone::*",
    "OS::Octavia::*",
    "OS::Barbican::*",
    "OS::Designate::*",
    "OS::Blazar::*",
    "OS::Magnum::*",
    "OS::Mistral::*",
    "OS::Monasca::*",
    "OS::Swift::*",
    "OS::Zaqar::*",
    "OS::Zun::*",
    "OS::Aodh::*",
    "OS::Glance::*",
    "OS::Nova::FloatingIP*",
    "OS::Nova::KeyPair",
    "OS::Nova::ServerGroup",
    "OS::Nova::Flavor",
    "OS::Nova::HostAggregate",
    # Heat's other EC2 types (AWS::EC2::Instance is a server here, as OS::Nova::Server is).
    "AWS::EC2::EIP*",
    "AWS::EC2::Volume*",
    "AWS::EC2::SecurityGroup",
    "AWS::EC2::VPC*",
    "AWS::EC2::Subnet*",
    "AWS::EC2::InternetGateway",
    "AWS::EC2::NetworkInterface",
    "AWS::EC2::RouteTable",
    "AWS::ElasticLoadBalancing::*",
    "AWS::IAM::*",  # Keystone users and keys, in Heat
    "AWS::S3::*",  # Swift containers
    "AWS::RDS::*",  # a database server
    "AWS::CloudWatch::*",  # alarms
)
DUMMY = {"number": "1", "boolean": "false", "json": "{}", "comma_delimited_list": "a,b"}


VERSION_KEYS = ("heat_template_version", "AWSTemplateFormatVersion", "HeatTemplateFormatVersion")


def templates(folder: Path) -> list[Path]:
    """The templates below *folder*: HOT ``*.yaml`` and CFN ``*.yaml``/``*.template``/``*.json``."""
    found = (p for suffix in ("yaml", "template", "json") for p in folder.rglob(f"*.{suffix}"))
    return sorted(p for p in found if any(k in p.read_text(errors="replace") for k in VERSION_KEYS))


def parameters(path: Path) -> list[str]:
    """``-P`` arguments for the parameters that have no default."""
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return []
    args: list[str] = []
    cfn = isinstance(doc, dict) and "Parameters" in doc
    for name, spec in ((doc or {}).get("Parameters" if cfn else "parameters") or {}).items():
        if not isinstance(spec, dict) or ("Default" if cfn else "default") in spec:
            continue
        args += ["-P", f"{name}={_value(_hot(spec) if cfn else spec)}"]
    return args


def _hot(spec: dict[str, Any]) -> dict[str, Any]:
    """A CFN parameter's type and constraints as HOT's, for ``_value``."""
    types = {"Number": "number", "CommaDelimitedList": "comma_delimited_list", "Json": "json"}
    constraints: list[dict[str, Any]] = (
        [{"allowed_values": spec["AllowedValues"]}] if "AllowedValues" in spec else []
    )
    bounds = {k: spec[c] for k, c in (("min", "MinLength"), ("max", "MaxLength")) if c in spec}
    return {
        "type": types.get(str(spec.get("Type")), "string"),
        "constraints": [*constraints, {"length": bounds}],
    }


def _value(spec: dict[str, Any]) -> str:
    """A value a user might give: the first allowed one, else one of the type within any length bounds."""
    constraints = [c for c in spec.get("constraints") or [] if isinstance(c, dict)]
    allowed = [c["allowed_values"] for c in constraints if c.get("allowed_values")]
    if allowed:
        return str(allowed[0][0])
    if str(spec.get("type")) in DUMMY:
        return DUMMY[str(spec.get("type"))]
    length: dict[str, Any] = next((c["length"] for c in constraints if isinstance(c.get("length"), dict)), {})
    value = "Passw0rd4Example"[: int(length.get("max", 16))]
    return value + "x" * (int(length.get("min", 0)) - len(value))


def environment(path: Path) -> list[str]:
    for sibling in (path.with_name(f"{path.stem}_env.yaml"), path.with_name(f"{path.stem}-env.yaml")):
        if sibling.exists():
            return ["-e", sibling.name]
    return []


def check(path: Path, extra: list[str]) -> str | None:
    """None when the template validates; else the error's first line, without the file name."""
    argv = [str(ANNEAL), "template", "validate", path.name, *environment(path), *extra, *parameters(path)]
    done = subprocess.run(argv, cwd=path.parent, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.startswith("anneal: error:")] or [
        done.stderr.strip() or done.stdout.strip()
    ]
    return lines[0].replace(f"anneal: error: {path.name}: ", "")


def cause(error: str) -> str:
    """A refusal's cause, for grouping: the unsupported type's service, or the kind of problem."""
    found = re.search(r"type '([A-Za-z0-9]+::[A-Za-z0-9]+)::", error)
    if found:
        return f"needs {found[1]}"
    for key, label in (
        ("was not provided", "get_file of a file outside the folder"),
        ("has no attribute", "an attribute Anneal's type does not have"),
        ("external", "external resources"),
        ("neither a supported type", "a type only an environment defines"),
    ):
        if key in error:
            return label
    return "other: " + error[:80]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a folder of Heat templates (e.g. heat-templates/hot)")
    args = parser.parse_args()
    found = templates(args.folder)
    if not found:
        raise SystemExit(f"no templates below {args.folder}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="anneal-corpus-") as tmp:
        stub = Path(tmp) / "stub-services.yaml"
        stub.write_text(yaml.safe_dump({"resource_registry": dict.fromkeys(STUBBED, "OS::Heat::None")}))
        results = {p: (check(p, []), check(p, ["-e", str(stub)])) for p in found}
    print(
        f"corpus {args.folder}: {len(found)} templates, {time.monotonic() - started:.0f} s, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    for column, label in ((0, "as written"), (1, "other services stubbed to OS::Heat::None")):
        refused: dict[Path, str] = {p: e for p, r in results.items() if (e := r[column]) is not None}
        taken = len(found) - len(refused)
        print(f"\n{label}: {taken} of {len(found)} validate ({taken / len(found):.0%}; Heat: 100 %)")
        for reason, count in collections.Counter(cause(e) for e in refused.values()).most_common():
            print(f"  {count:3d}  {reason}")
        if column == 1:
            for path, error in sorted(refused.items()):
                print(f"       {path.relative_to(args.folder)}: {error[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
