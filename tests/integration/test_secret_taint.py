"""Secrets stay sealed whatever a template derives from them: taint, not text matching (docs/security.md).

A real control plane (SQLite, then PostgreSQL) and a real local agent on LOCAL media, at
DEBUG, run a stack whose hidden parameters carry unique canaries through every derivation
in DERIVATIONS: members of a hidden JSON parameter, parts of a hidden string, a hidden
value with a `"` inside a map, one used as a map key, str_replace, list_join, repeat,
map_merge, list_concat, make_url, digest, an OS::Heat::Value, a RandomString, a config body
built with str_replace, a StructuredConfig's get_input, a deployment group, CloudConfig
and MultipartMime, stack outputs, a deployment output the hook returns (declared
`secret: true`) fed into another deployment, and an error_output the hook fills with a
hidden value (a second stack, which fails), and a deployment retried under a retry
policy whose every attempt prints a hidden value (a third stack, which fails). Every hook proves it got the real value by
writing its SHA-256. Then the canaries' unique parts are searched for in: every file
under the test's directory (control-plane and agent logs, the SQLite database and its
WAL, the agent's state dir, the LOCAL published documents and media), a pg_dump of the
PostgreSQL database, every API answer, the CLI's output in every format, the signed
document bytes, and /proc/<pid>/{cmdline,environ}. Zero hits, with one stated exception:
a value the hook itself wrote back (the returned output, the error_output) is where the
hook and the agent keep what the hook produced: the hook's files, the agent's copies of
its output, the ledger's outbox and the LOCAL outbox of signal files (not agent.log).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.courier import Media
from tests.support.openstack import heat_request
from tests.support.pg import Postgres
from tests.support.processes import command, free_port
from tests.support.waiting import wait_until

NAMES = "MEMBER PART QMAP KEYED REPLACED JOINED REPEATED MERGED DIGEST URL VALUE LISTED"
TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  pw: {type: string, hidden: true}
  creds: {type: json, hidden: true}
  quoted: {type: string, hidden: true}
  keyname: {type: string, hidden: true}
  listy: {type: comma_delimited_list, hidden: true}
  echoed: {type: string, hidden: true}
  out: {type: string}
  vault: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: canary, software_config_transport: LOCAL}}
  token: {type: OS::Heat::RandomString, properties: {length: 32}}
  val:
    type: OS::Heat::Value
    properties: {value: {map_merge: [{password: {get_param: [creds, password]}}, {host: db}]}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: OUT}, {name: NAMES}, {name: ECHO}]
      outputs: [{name: echo, secret: true}]
      config: |
        #!PYTHON
        import hashlib, os
        for name in os.environ["NAMES"].split():
            with open(os.path.join(os.environ["OUT"], name), "w") as f:
                f.write(hashlib.sha256(os.environ.get(name, "").encode()).hexdigest())
        if os.environ.get("TOKEN"):  # the test cannot know it: handed over outside the scanned tree
            with open(os.path.join(os.environ["VAULT"], "token"), "w") as f:
                f.write(os.environ["TOKEN"])
        with open(os.environ["heat_outputs_path"] + ".echo", "w") as f:
            f.write(os.environ.get("ECHO", ""))
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      input_values:
        OUT: {get_param: out}
        NAMES: "NAMES_LIST"
        MEMBER: {get_param: [creds, password]}
        PART: {str_split: [":", {get_param: pw}, 1]}
        QMAP: {a: {get_param: quoted}}
        KEYED: {map_replace: [{k: 1}, {keys: {k: {get_param: keyname}}}]}
        REPLACED: {str_replace: {template: "x=$P", params: {"$P": {get_param: pw}}}}
        JOINED: {list_join: [",", {get_param: listy}]}
        REPEATED: {repeat: {for_each: {"%v%": {get_param: listy}}, template: "v=%v%"}}
        MERGED: {map_merge: [{p: {get_param: pw}}, {h: db}]}
        DIGEST: {digest: [sha256, {get_param: pw}]}
        URL: {make_url: {scheme: https, host: db, username: u, password: {get_param: pw}}}
        VALUE: {get_attr: [val, value]}
        LISTED: {list_concat: [{get_param: listy}, [plain]]}
        ECHO: {get_param: echoed}
        TOKEN: {get_attr: [token, value]}
        VAULT: {get_param: vault}
  chained:  # the secret output of one deployment is the input of the next
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      input_values: {OUT: {get_param: out}, NAMES: ECHOED, ECHOED: {get_attr: [dep, echo]}}
  cfg2:  # the hidden value is inside the config body itself
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: OUT}]
      config:
        str_replace:
          params: {"@SECRET@": {get_param: pw}}
          template: |
            #!PYTHON
            import hashlib, os
            with open(os.path.join(os.environ["OUT"], "CONFIG"), "w") as f:
                f.write(hashlib.sha256("@SECRET@".encode()).hexdigest())
  dep2:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg2}, server: {get_resource: box}, input_values: {OUT: {get_param: out}}}
  scfg:
    type: OS::Heat::StructuredConfig
    properties:
      group: canary
      inputs: [{name: M}, {name: K}, {name: OUT}]
      config: {member: {get_input: M}, keyed: {get_input: K}, out: {get_input: OUT}}
  sdep:
    type: OS::Heat::StructuredDeployment
    properties:
      config: {get_resource: scfg}
      server: {get_resource: box}
      input_values:
        M: {get_param: [creds, password]}
        K: {map_replace: [{k: 1}, {keys: {k: {get_param: keyname}}}]}
        OUT: {get_param: out}
  grp:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: cfg}
      servers: {one: {get_resource: box}}
      input_values: {OUT: {get_param: out}, NAMES: GROUPED, GROUPED: {str_split: [":", {get_param: pw}, 0]}}
  cc:
    type: OS::Heat::CloudConfig
    properties:
      cloud_config:
        users: [{name: app, passwd: {get_param: [creds, password]}}]
        write_files: [{path: /etc/app, content: {get_param: quoted}}]
  mime:
    type: OS::Heat::MultipartMime
    properties:
      parts: [{config: {get_resource: cc}}, {config: {list_join: [" ", [echo, {get_param: keyname}]]}}]
outputs:
  password: {value: {get_param: pw}}
  member: {value: {get_param: [creds, password]}}
  part: {value: {str_split: [":", {get_param: pw}, 0]}}
  quoted_map: {value: {a: {get_param: quoted}}}
  keyed: {value: {map_replace: [{k: 1}, {keys: {k: {get_param: keyname}}}]}}
  digest: {value: {digest: [sha256, {get_param: pw}]}}
  listed: {value: {list_join: ["+", {get_param: listy}]}}
  echo: {value: {get_attr: [dep, echo]}}
  value: {value: {get_attr: [val, value]}}
  mime: {value: {get_attr: [mime, config]}}
  token: {value: {get_attr: [token, value]}}
  group_out: {value: {get_attr: [grp, echo]}}
  plain: {value: {get_param: out}}
""".replace("NAMES_LIST", NAMES)

FAILING = """
heat_template_version: 2018-08-31
parameters:
  failpw: {type: string, hidden: true}
resources:
  cfgf:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: FAILPW}]
      outputs: [{name: err, error_output: true}]
      config: |
        #!/bin/sh
        printf 'cannot log in with %s' "$FAILPW" > "$heat_outputs_path.err"
        echo "trying $FAILPW"
        echo "trying $FAILPW" >&2
  depf:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfgf}, server: canary, input_values: {FAILPW: {get_param: failpw}}}
"""

#: A third stack: a deployment retried under a retry policy, every attempt printing the hidden value.
RETRYING = """
heat_template_version: 2018-08-31
parameters:
  retrypw: {type: string, hidden: true}
resources:
  cfgr:  # fails every attempt: each attempt's output is kept
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: RETRYPW}]
      config: |
        #!/bin/sh
        echo "retrying with $RETRYPW"
        echo "refused $RETRYPW" >&2
        exit 3
  depr:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfgr}
      server: canary
      input_values: {RETRYPW: {get_param: retrypw}}
      retry: {retries: 2, backoff: {initial: 0.1, factor: 1}}
"""

#: What the canary test derives from hidden values (docs/security.md counts them).
#: The CLI's output formats, each searched for the canaries.
ALL_FORMATS = ("table", "json", "yaml", "value")
DERIVATIONS = (
    "whole hidden value",
    "member of a hidden json (get_param path)",
    "str_split part",
    "value with a quote inside a map",
    "map key (map_replace)",
    "str_replace",
    "list_join",
    "repeat",
    "map_merge",
    "list_concat",
    "make_url",
    "digest",
    "OS::Heat::Value (get_attr)",
    "OS::Heat::RandomString",
    "config body (str_replace)",
    "StructuredConfig get_input",
    "deployment group input",
    "CloudConfig",
    "MultipartMime",
    "stack outputs",
    "secret deployment output into another deployment",
    "error_output",
    "stdout and stderr of each attempt of a retried deployment (and its failure reason)",
)

# The StructuredConfig's hook: proves what it got by writing a SHA-256, nothing in clear.
CANARY_HOOK = f"""#!{sys.executable}
import hashlib, json, os, sys
config = json.load(sys.stdin)["config"]
shown = json.dumps({{"keyed": config["keyed"], "member": config["member"]}}, sort_keys=True)
with open(os.path.join(config["out"], "STRUCTURED"), "w") as f:
    f.write(hashlib.sha256(shown.encode()).hexdigest())
print(json.dumps({{"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}}))
"""


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Canaries:
    """Unique values for each hidden parameter, and the unique parts a search looks for."""

    def __init__(self) -> None:
        self.tags: dict[str, str] = {}
        self.pw = f"{self.tag('pa')}:{self.tag('pb')}"
        self.member = self.tag("m")
        self.quoted = f'cnry-q"uote-{self.tag("q")}'
        self.keyname = self.tag("k")
        self.listy = [self.tag("l1"), self.tag("l2")]
        self.echoed = self.tag("e")
        self.failpw = self.tag("f")
        self.retrypw = self.tag("r")
        self.tags["digest"] = sha(self.pw)

    def tag(self, name: str) -> str:
        self.tags[name] = f"cnry{name}{secrets.token_hex(10)}"
        return self.tags[name]

    def params(self, out: Path, vault: Path) -> dict[str, Any]:
        return {
            "pw": self.pw,
            "creds": json.dumps({"user": "app-user", "password": self.member}),
            "quoted": self.quoted,
            "keyname": self.keyname,
            "listy": ",".join(self.listy),
            "echoed": self.echoed,
            "out": str(out),
            "vault": str(vault),
        }

    def expected(self) -> dict[str, str]:
        """What each hook must have received, as the SHA-256 it writes."""
        value = json.dumps({"host": "db", "password": self.member})
        return {
            "MEMBER": sha(self.member),
            "PART": sha(self.pw.split(":")[1]),
            "QMAP": sha(json.dumps({"a": self.quoted})),
            "KEYED": sha(json.dumps({self.keyname: 1})),
            "REPLACED": sha(f"x={self.pw}"),
            "JOINED": sha(",".join(self.listy)),
            "REPEATED": sha(json.dumps([f"v={x}" for x in self.listy])),
            "MERGED": sha(json.dumps({"h": "db", "p": self.pw})),
            "DIGEST": sha(sha(self.pw)),
            "URL": sha(f"https://u:{urllib.parse.quote(self.pw, safe='')}@db"),
            "VALUE": sha(value),
            "LISTED": sha(json.dumps([*self.listy, "plain"])),
            "ECHOED": sha(self.echoed),
            "CONFIG": sha(self.pw),
            "GROUPED": sha(self.pw.split(":")[0]),
            "STRUCTURED": sha(
                json.dumps({"keyed": {self.keyname: 1}, "member": self.member}, sort_keys=True)
            ),
        }


@pytest.fixture
def vault() -> Iterator[Path]:
    """Outside the scanned tree: where the hook hands over the random string, 0700."""
    path = Path(tempfile.mkdtemp(prefix="anneal-taint-vault-"))
    yield path
    shutil.rmtree(path)


@pytest.fixture
def plane(
    tmp_path: Path, db_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ControlPlane, Media, list[str]]]:
    monkeypatch.setenv("ANNEAL_LOG_LEVEL", "DEBUG")  # the local agents inherit it
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "canary").write_text(CANARY_HOOK)
    (hooks / "canary").chmod(0o755)
    media = Media.under(tmp_path)
    heat = f"127.0.0.1:{free_port()}"  # Heat's API too: its answers are searched as well
    cp = start_control_plane(
        tmp_path,
        *db_args,
        "--log-level",
        "DEBUG",
        f"--agent-arg=--hook-dir={hooks}",
        "--heat-listen",
        heat,
        *media.serve_args(),
        exec_=True,  # its /proc/PID/environ and cmdline are searched: the command's own, not a zygote's
    )
    yield cp, media, db_args
    stop_control_plane(cp)


def carry(cp: ControlPlane, media: Media, said: list[str]) -> None:
    """One courier trip: the document out to the media, signals back (the CLI's import output in *said*)."""
    server = cp.api("GET", "/v1/servers/canary")
    if server.status == 200 and media.document(server.body["id"]).exists():
        shutil.copyfile(media.document(server.body["id"]), media.media / "document.json")
    if media.outbox.exists() and any(media.outbox.iterdir()):
        said.append(cp.cli("signal", "import", str(media.outbox), "-f", "json").stdout)


def courier(cp: ControlPlane, media: Media, stacks: list[str], said: list[str]) -> dict[str, str]:
    """Carry documents out and signals back until every stack settles."""

    def settled() -> dict[str, str] | None:
        carry(cp, media, said)
        states = {s: cp.api("GET", f"/v1/stacks/{s}").body["status"] for s in stacks}
        return None if any(v.endswith("IN_PROGRESS") for v in states.values()) else states

    return wait_until(settled, f"stacks {stacks} did not settle; log {cp.log}", 240, interval=0.3)


def checked(cp: ControlPlane, media: Media, said: list[str]) -> str:
    """`anneal stack check leaky` with the courier carrying its order out and the answers back: its report."""
    argv = [command("anneal"), "stack", "check", "leaky", "--timeout", "120"]
    with subprocess.Popen(
        argv, env=cp.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:

        def answered() -> bool:
            carry(cp, media, said)
            return proc.poll() is not None

        wait_until(answered, "stack check still waits", 150, 0.3)
        report = proc.stdout.read() if proc.stdout else ""
    assert 0 == proc.returncode, report  # the check ran on the server: its results are searched too
    return report


def answers(cp: ControlPlane, formats: tuple[str, ...]) -> list[str]:
    """Every API answer and CLI output (in each of *formats*) about the stacks, the server and its deployments."""
    shown = []
    for stack in ("leaky", "leakfail", "leakretry"):
        for path in ("", "/outputs", "/resources", "/events", "/failures"):
            shown.append(json.dumps(cp.api("GET", f"/v1/stacks/{stack}{path}").body))
    deployments = cp.api("GET", "/v1/deployments").body
    shown += [json.dumps(deployments), json.dumps(cp.api("GET", "/v1/stacks").body)]
    shown += [json.dumps(cp.api("GET", f"/v1/deployments/{d['id']}").body) for d in deployments]
    shown += [json.dumps(cp.api("GET", p).body) for p in ("/v1/servers", "/v1/servers/canary")]
    commands = [["stack", "list"], ["deployment", "list"], ["server", "show", "canary"]]
    for stack in ("leaky", "leakfail", "leakretry"):
        commands += [
            ["stack", verb, stack] for verb in ("show", "outputs", "failures", "resources", "events")
        ]
    commands += [["deployment", "show", d["id"]] for d in deployments]
    commands += [["deployment", "show", d["id"], "--attempts"] for d in deployments]
    logs = [["deployment", "log", d["id"]] for d in deployments]
    # Every command in JSON and every log, each a process of its own as an operator runs them (four at
    # once); the other formats render the same answers: the CLI's own code in this process prints them.
    done = cp.clis([[*c, "-f", "json"] for c in commands] + logs)
    others = [fmt for fmt in formats if fmt != "json"]
    rendered = {(fmt, i): cp.cli_here(*c, "-f", fmt) for fmt in others for i, c in enumerate(commands)}
    # Each command exits alike in every format, in a process of its own or in this one.
    assert {k: r.returncode for k, r in rendered.items()} == {(f, i): done[i].returncode for f, i in rendered}
    shown += [d.stdout + d.stderr for d in [*done[: len(commands)], *rendered.values()]]
    shown += [d.stdout for d in done[len(commands) :]]
    return shown


def heat_answers(cp: ControlPlane) -> list[str]:
    """Every answer of Heat's API (--heat-listen) about the stacks, their resources, events, configs and deployments."""
    heat_url = "http://" + cp.log.read_text().split("Orchestration API v1 on http://", 1)[1].split("/", 1)[0]

    def get(path: str) -> Any:
        status, body = heat_request(cp, heat_url, "GET", path)
        assert 200 == status, (path, body)
        return body

    shown = [get("/stacks"), get("/stacks/detail")]
    for stack in ("leaky", "leakfail", "leakretry"):
        base = f"/stacks/{stack}/{cp.api('GET', f'/v1/stacks/{stack}').body['id']}"
        shown += [get(base + p) for p in ("", "/template", "/environment", "/files", "/events")]
        outputs, resources = get(base + "/outputs"), get(base + "/resources")
        shown += [outputs, resources]
        shown += [get(f"{base}/outputs/{o['output_key']}") for o in outputs["outputs"]]
        for res in resources["resources"]:
            at = f"{base}/resources/{res['resource_name']}"
            shown += [get(at), get(at + "/metadata"), get(at + "/events")]
    configs, deployments = get("/software_configs"), get("/software_deployments")
    shown += [configs, deployments]
    shown += [get(f"/software_configs/{c['id']}") for c in configs["software_configs"]]
    for dep in deployments["software_deployments"]:
        shown += [
            get(f"/software_deployments/{dep['id']}"),
            get(f"/software_deployments/metadata/{dep['server_id']}"),
        ]
    return [json.dumps(body) for body in shown]


def document_bytes(cp: ControlPlane) -> bytes:
    """The signed document as the agent gets it over HTTP."""
    credential = json.loads((cp.agent_dir("canary") / "agent.json").read_text())["credential"]
    request = urllib.request.Request(
        cp.url + "/v1/agent/document", headers={"Authorization": f"Bearer {credential}"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return bytes(resp.read())


def test_values_derived_from_hidden_parameters_appear_nowhere_in_clear(
    plane: tuple[ControlPlane, Media, list[str]], tmp_path: Path, vault: Path, postgres_dump: Any
) -> None:
    """Every derivation of a hidden value reaches its hook, and no artefact holds any part of it in clear."""
    cp, media, db_args = plane
    canaries = Canaries()
    out = tmp_path / "out"
    out.mkdir()
    said: list[str] = []
    created = cp.create(
        "leaky", TEMPLATE.replace("PYTHON", sys.executable), params=canaries.params(out, vault)
    )
    assert 201 == created.status, created.body
    # The two failing stacks name the server the first one makes: created once it exists, and
    # then all three run at once.
    wait_until(lambda: cp.api("GET", "/v1/servers/canary").status == 200, "server canary not made", 60)
    failing = cp.create("leakfail", FAILING, params={"failpw": canaries.failpw})
    assert 201 == failing.status, failing.body
    retrying = cp.create("leakretry", RETRYING, params={"retrypw": canaries.retrypw})
    assert 201 == retrying.status, retrying.body
    settled = courier(cp, media, ["leaky", "leakfail", "leakretry"], said)
    expected = {"leaky": "CREATE_COMPLETE", "leakfail": "CREATE_FAILED", "leakretry": "CREATE_FAILED"}
    assert expected == settled, cp.api("GET", "/v1/stacks/leaky/failures").body

    # The hooks got the real values.
    got = {name: (out / name).read_text() for name in canaries.expected()}
    assert canaries.expected() == got
    token = (vault / "token").read_text()
    assert 32 == len(token)
    canaries.tags["token"] = token

    # What operators see: masked, but for what is not secret.
    outputs = cp.outputs("leaky")
    assert str(out) == outputs.pop("plain")
    assert {"a": "******"} == outputs.pop("quoted_map")  # only the member from the secret
    assert {"one": "******"} == outputs.pop("group_out")
    assert {k: "******" for k in outputs} == outputs
    failure = cp.api("GET", "/v1/stacks/leakfail/failures").body[0]
    assert failure["reason"].endswith("err : cannot log in with ******"), failure
    assert "trying ******" in failure["deploy_stdout"]
    (retried,) = cp.api("GET", "/v1/stacks/leakretry/failures").body
    assert retried["reason"].endswith("attempt 3: status code 3: refused ******"), retried
    attempts = cp.api("GET", f"/v1/deployments/{retried['deployment_id']}").body["attempts"]
    assert [1, 2, 3] == [a["attempt"] for a in attempts]
    assert all("refused ******" in a["stderr"] and "with ******" in a["stdout"] for a in attempts), attempts

    # The CLI renders the API's JSON, which is searched on both databases: its every format
    # is searched once, on SQLite; on PostgreSQL its JSON output only (a third of the processes).
    shown = answers(cp, ALL_FORMATS if not db_args else ("json",))
    shown.append(checked(cp, media, said))  # last: it acts on the stack
    heat_shown = heat_answers(cp)
    assert any('"******"' in text for text in heat_shown)  # Heat's API showed the secrets, masked
    published = document_bytes(cp)
    sealed = json.loads(published)["anneal"]["deployments"]
    assert any("config" in meta.get("sealed", []) for meta in sealed.values())  # cfg2's body

    # Where the hook's own write-back may be: its files, the agent's copies of its output,
    # the ledger's outbox (until acknowledged) and the LOCAL outbox of signal files.
    state = cp.agent_dir("canary")
    agent_side = (state / "hooks", state / "output", media.outbox)
    written_back = {canaries.tags["e"], canaries.tags["f"], canaries.tags["r"]}
    hits = []
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file() and not p.is_relative_to(out))
    for path in files:
        data = path.read_bytes()
        for name, needle in canaries.tags.items():
            hooks_own = needle in written_back and (
                path.name.startswith("ledger.sqlite") or any(path.is_relative_to(d) for d in agent_side)
            )
            if needle.encode() in data and not hooks_own:
                hits.append(f"{name} in {path}")
    places = [("document", published.decode()), *((f"answer {i}", s) for i, s in enumerate(shown + said))]
    places += [(f"Heat API answer {i}", text) for i, text in enumerate(heat_shown)]
    if db_args:
        dump = postgres_dump(db_args[1]).decode("utf-8", "replace")
        assert "leakfail" in dump  # the control plane's own database
        places.append(("pg_dump", dump))
    for where, text in places:
        hits += [f"{name} in {where}" for name, needle in canaries.tags.items() if needle in text]
    for pid in (cp.proc.pid, int((cp.agent_dir("canary") / "agent.pid").read_text())):
        for part in ("cmdline", "environ"):
            data = Path(f"/proc/{pid}/{part}").read_bytes()
            hits += [f"{n} in /proc/{pid}/{part}" for n, v in canaries.tags.items() if v.encode() in data]
    print(
        f"\ncanary secrets [{'postgresql' if db_args else 'sqlite'}]: {len(DERIVATIONS)} derivations, "
        f"{len(canaries.tags)} canaries, {len(files)} files, {len(places)} answers/dumps searched "
        f"({len(heat_shown)} of Heat's API), "
        f"{len(hits)} hits"
    )
    assert [] == hits
    assert b"DEBUG" in (tmp_path / "control.log").read_bytes()  # the search covered debug logging


@pytest.fixture
def postgres_dump(request: pytest.FixtureRequest) -> Any:
    """pg_dump of a database the control plane used (PostgreSQL runs only for that parameter)."""

    def dump(url: str) -> bytes:
        pg: Postgres = request.getfixturevalue("postgres")
        return pg.dump(url)

    return dump
