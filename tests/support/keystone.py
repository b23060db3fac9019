"""A real Keystone (identity v3, fernet tokens, SQLite) served by uwsgi on a free loopback port.

Installed by `ci/tools.d/82-keystone.sh` into `.venv/tools/keystone`; set up as
/work/shared/reference/env.md's recipe does it (db_sync, the fernet and credential key repositories,
bootstrap). It answers about 8 s after start (and costs as many seconds of CPU), so the run starts one
for the modules that use it, on whichever xdist workers they run (the `keystone_share` fixture,
tests/support/shared.py), and each module makes its control plane against it::

    with keystone_cloud(keystone_share, tmp_path_factory, users, cache) as cloud:
        ...

Projects, users and role assignments go through Keystone's own REST API with the
bootstrap admin's token.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import OpenStack, start_heat_plane
from tests.support.processes import ROOT, free_port, stop_process
from tests.support.shared import Shared, run_dir
from tests.support.waiting import wait_until

KEYSTONE = ROOT / ".venv" / "tools" / "keystone"
#: The bootstrap admin's password (user "admin" in project "admin", domain "default").
ADMIN_PASSWORD = "keystone-admin-secret"
_CONF = """[DEFAULT]
log_dir = {d}/log
[database]
connection = sqlite:///{d}/keystone.db
[identity]
password_hash_rounds = 4
[token]
provider = fernet
expiration = 3600
[fernet_tokens]
key_repository = {d}/fernet-keys
[fernet_receipts]
key_repository = {d}/fernet-keys
[credential]
key_repository = {d}/credential-keys
"""
_WSGI = "from keystone.server.wsgi import initialize_public_application\napplication = initialize_public_application()\n"


@dataclass
class Keystone:
    """One running Keystone: its v3 URL, its directory, its uwsgi master process (None in a worker that
    attached to the run's Keystone another worker started: tests/support/shared.py)."""

    url: str
    root: Path
    process: subprocess.Popen[bytes] | None
    roles: dict[str, str] = field(default_factory=dict)
    admin_token: str = ""

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, Any]:
        """One request to the v3 API: (status, JSON body or None, response headers)."""
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Content-Type": "application/json", **(headers or {})}
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None, resp.headers
        except urllib.error.HTTPError as e:
            with e:
                raw = e.read()
                return e.code, json.loads(raw) if raw else None, e.headers

    def token(self, user: str, password: str, project: str) -> tuple[str, dict[str, Any]]:
        """A project-scoped token for *user* (password auth, domain "default"): the token and its body."""
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {"user": {"name": user, "domain": {"id": "default"}, "password": password}},
                },
                "scope": {"project": {"name": project, "domain": {"id": "default"}}},
            }
        }
        status, found, headers = self.request("POST", "/auth/tokens", body)
        assert status == 201, f"token for {user} in {project}: {status} {found}"
        return str(headers["X-Subject-Token"]), found["token"]

    def admin(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        """A request as the bootstrap admin; its JSON body (2xx expected)."""
        status, found, _ = self.request(method, path, body, {**self._as_admin(), **(headers or {})})
        assert 200 <= status < 300, f"{method} {path}: {status} {found}"
        return found

    def _as_admin(self) -> dict[str, str]:
        """The bootstrap admin's token header (the token got once)."""
        if not self.admin_token:
            self.admin_token = self.token("admin", ADMIN_PASSWORD, "admin")[0]
        return {"X-Auth-Token": self.admin_token}

    def role(self, name: str) -> str:
        """The id of role *name*, made if Keystone has none by that name."""
        if not self.roles:
            self.roles = {r["name"]: r["id"] for r in self.admin("GET", "/roles")["roles"]}
        if name not in self.roles:
            self.roles[name] = self.admin("POST", "/roles", {"role": {"name": name}})["role"]["id"]
        return self.roles[name]

    def project(self, name: str) -> str:
        """Project *name* in domain "default", made unless there is one; its id."""
        return self._ensure("project", {"name": name, "domain_id": "default"})

    def user(self, name: str, password: str, project_id: str, role: str) -> str:
        """User *name* with *role* on *project_id*, made unless there is one; the user's id.

        Modules sharing the run's Keystone ask for the same users (alice, member of blue): the second
        finds the first's."""
        user_id = self._ensure("user", {"name": name, "password": password, "domain_id": "default"})
        self.admin("PUT", f"/projects/{project_id}/users/{user_id}/roles/{self.role(role)}")
        return user_id

    def _ensure(self, kind: str, body: dict[str, str]) -> str:
        """POST /{kind}s, or on 409 (made already, perhaps by another worker) find it by name; its id."""
        status, made, _ = self.request("POST", f"/{kind}s", {kind: body}, self._as_admin())
        if status == 409:
            query = urllib.parse.urlencode({"name": body["name"], "domain_id": "default"})
            (made,) = self.admin("GET", f"/{kind}s?{query}")[f"{kind}s"]
            return str(made["id"])
        assert status == 201, f"POST /{kind}s {body['name']}: {status} {made}"
        return str(made[kind]["id"])

    def revoke(self, token: str) -> None:
        """Revoke *token* in Keystone (DELETE /v3/auth/tokens), as `openstack token revoke` does."""
        self.admin("DELETE", "/auth/tokens", headers={"X-Subject-Token": token})

    def register(self, service_type: str, name: str, url: str, region: str = "RegionOne") -> None:
        """A service and its public, internal and admin endpoints in *region*, made if new (the catalogue entry)."""
        if region != "RegionOne":
            self.admin("POST", "/regions", {"region": {"id": region}})
        made = self.admin("POST", "/services", {"service": {"type": service_type, "name": name}})
        for interface in ("public", "internal", "admin"):
            endpoint = {
                "service_id": made["service"]["id"],
                "interface": interface,
                "url": url,
                "region_id": region,
            }
            self.admin("POST", "/endpoints", {"endpoint": endpoint})


def require_keystone() -> None:
    """Fail (not skip) when Keystone is missing, naming the command that installs it."""
    if not (KEYSTONE / "bin" / "uwsgi").exists():
        raise AssertionError(f"Keystone or uwsgi is missing ({KEYSTONE}): run `make tools`")


def _manage(conf: Path, *args: str) -> None:
    """`keystone-manage *args*` on *conf*; it must succeed."""
    done = subprocess.run(
        [str(KEYSTONE / "bin" / "python"), str(KEYSTONE / "bin" / "keystone-manage"), "--config-file", str(conf),
         *args],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"keystone-manage {args[0]}: {done.stderr[-2000:]}"


def _key_repository(folder: Path) -> None:
    """Fernet keys as `keystone-manage fernet_setup` (and credential_setup) writes them: a staged key 0 and a
    primary key 1, each urlsafe base64 of 32 random bytes, 0600; written here to spare two slow Python starts."""
    for name in ("0", "1"):
        path = folder / name
        path.touch(mode=0o600)
        path.write_bytes(base64.urlsafe_b64encode(os.urandom(32)))


def start_keystone(root: Path, port: int | None = None) -> Keystone:
    """Set up and start a Keystone in *root* on loopback *port* (default a free one); wait until `GET /v3` answers."""
    require_keystone()
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/v3"
    for sub in ("log", "fernet-keys", "credential-keys"):
        (root / sub).mkdir(mode=0o700)
    conf = root / "keystone.conf"
    conf.write_text(_CONF.format(d=root))
    for keys in ("fernet-keys", "credential-keys"):
        _key_repository(root / keys)
    _manage(conf, "db_sync")
    # uwsgi loads Keystone (~8 s of imports) while bootstrap fills the database: the two overlap.
    keystone = Keystone(url, root, _serve(root, conf, port))
    try:
        _manage(conf, "bootstrap", "--bootstrap-password", ADMIN_PASSWORD, "--bootstrap-admin-url", url,
                "--bootstrap-public-url", url, "--bootstrap-internal-url", url,
                "--bootstrap-region-id", "RegionOne")  # fmt: skip
        wait_until(
            lambda: _answers(keystone), f"Keystone never answered at {url} (see {root}/uwsgi.log)", 120, 0.5
        )
    except BaseException:
        stop_keystone(keystone)
        raise
    return keystone


def _serve(root: Path, conf: Path, port: int) -> subprocess.Popen[bytes]:
    """uwsgi serving Keystone's public application on loopback *port*, its log in root/uwsgi.log."""
    (root / "wsgi.py").write_text(_WSGI)
    with (root / "uwsgi.log").open("wb") as log:
        return subprocess.Popen(
            [str(KEYSTONE / "bin" / "uwsgi"), "--http-socket", f"127.0.0.1:{port}", "--wsgi-file",
             str(root / "wsgi.py"), "--master", "--processes", "1", "--threads", "4", "--die-on-term", "--need-app",
             # uwsgi's http-socket closes after each answer: saying so keeps clients from reusing the socket
             # (keystoneauth's POST on a connection uwsgi closed is a "connection reset").
             "--add-header", "Connection: close"],
            env={**os.environ, "OS_KEYSTONE_CONFIG_FILES": str(conf)}, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _answers(keystone: Keystone) -> bool:
    assert keystone.process is not None and keystone.process.poll() is None, (
        f"uwsgi exited: {(keystone.root / 'uwsgi.log').read_text()[-2000:]}"
    )
    try:
        return keystone.request("GET", "")[0] == 200
    except OSError:
        return False


def stop_keystone(keystone: Keystone) -> None:
    """SIGTERM the uwsgi master this run started (by its PID; --die-on-term stops its workers)."""
    stop_process(keystone.process, grace=20)


def keystone_cli(
    cp: ControlPlane,
    keystone: Keystone,
    user: str,
    password: str,
    project: str,
    *,
    region: str = "RegionOne",
    endpoint: str = "",
) -> OpenStack:
    """The real openstack CLI logged in to *keystone* as *user* in *project* (password auth), exactly as
    against Heat: it finds the orchestration endpoint of *region* in the token's catalogue (*endpoint*, the
    project's Heat URL, only serves the plain HTTP polls of OpenStack.get)."""
    auth = (
        "--os-auth-url", keystone.url, "--os-identity-api-version", "3",
        "--os-username", user, "--os-password", password, "--os-project-name", project,
        "--os-user-domain-id", "default", "--os-project-domain-id", "default", "--os-region-name", region,
    )  # fmt: skip
    return OpenStack(cp, endpoint, auth=auth)


#: The service user the control plane validates tokens as, and every test user's password.
SERVICE_USER, SERVICE_PASSWORD, SERVICE_PROJECT = "anneal", "anneal-service-secret", "service"
PASSWORD = "user-secret"


#: The run's Keystone as the modules get it (the `keystone_share` fixture).
KeystoneShare = Shared[Keystone]


def shared_keystone(factory: pytest.TempPathFactory) -> KeystoneShare:
    """The run's one Keystone with the service user (Keystone takes long to start: test_keystone.py and
    test_keystone_flows.py share it, on whichever workers they run; tests/support/shared.py)."""
    return Shared(
        "keystone",
        run_dir(factory),
        _start_for_run,
        stop_keystone,
        lambda ks: {"url": ks.url, "root": str(ks.root)},
        lambda found: Keystone(found["url"], Path(found["root"]), None),
    )


def _start_for_run(root: Path) -> Keystone:
    root.mkdir()
    keystone = start_keystone(root)
    try:
        keystone.user(SERVICE_USER, SERVICE_PASSWORD, keystone.project(SERVICE_PROJECT), "service")
    except BaseException:
        stop_keystone(keystone)
        raise
    return keystone


@dataclass
class Cloud:
    """Keystone, the control plane validating against it, its Heat API root, Keystone's project ids, and the
    region its orchestration endpoint is in."""

    keystone: Keystone
    cp: ControlPlane
    heat: str
    projects: dict[str, str]
    region: str

    def cli(self, user: str, project: str) -> OpenStack:
        endpoint = f"{self.heat}/v1/{self.projects[project]}"
        return keystone_cli(
            self.cp, self.keystone, user, PASSWORD, project, region=self.region, endpoint=endpoint
        )


@contextmanager
def keystone_cloud(
    share: KeystoneShare,
    factory: pytest.TempPathFactory,
    users: Sequence[tuple[str, str, str]],
    cache: float,
) -> Iterator[Cloud]:
    """The run's Keystone (*share*) and a control plane of this module validating against it
    (``--keystone-cache`` *cache*): *users* (name, project, role) with PASSWORD, Anneal registered as the
    orchestration service with docs/heat-api.md's catalogue entry, in a region of its own (another module's
    control plane may be in the same Keystone's catalogue)."""
    ks = share.acquire()
    try:
        cp, heat = start_heat_plane(
            factory.mktemp("plane"),
            "--keystone-url", ks.url, "--keystone-user", SERVICE_USER, "--keystone-cache", str(cache),
            env={"ANNEAL_KEYSTONE_PASSWORD": SERVICE_PASSWORD},
        )  # fmt: skip
    except BaseException:
        share.release()
        raise
    try:
        names = {SERVICE_PROJECT, *(project for _, project, _ in users)}
        projects = {name: ks.project(name) for name in sorted(names)}
        for user, project, role in users:
            ks.user(user, PASSWORD, projects[project], role)
        region = f"anneal-{secrets.token_hex(4)}"
        ks.register("orchestration", "heat", f"{heat}/v1/%(project_id)s", region)
        yield Cloud(ks, cp, heat, projects, region)
    finally:
        stop_control_plane(cp)
        share.release()
