"""HAProxy (Debian's package, `ci/tools.d/73-haproxy.sh`) on loopback in front of control-plane processes.

`config` is the configuration docs/operations.md recommends (`packaging/haproxy/anneal.cfg`)
with loopback addresses;
`running_haproxy` writes it, starts `haproxy -db` (foreground, one process this test
owns) and stops it by its PID. Its access log (one line per request, naming the
backend server that answered) goes to `haproxy.log` in the given directory.
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import ROOT, free_port, stop_process
from tests.support.waiting import wait_until

#: The configuration docs/operations.md gives operators; the tests run this file.
EXAMPLE = ROOT / "packaging" / "haproxy" / "anneal.cfg"


def config(port: int, backends: Sequence[int], *, maxconn: int = 4000) -> str:
    """The example configuration with loopback addresses: the front on *port*, one server per backend port.

    HAProxy needs about two descriptors per connection: *maxconn* must stay under half the limit.
    """
    replaced = {"maxconn": f"    maxconn {maxconn}", "bind": f"    bind 127.0.0.1:{port}"}
    out: list[str] = []
    for line in EXAMPLE.read_text().splitlines():
        word = line.split()[0] if line.strip() else ""
        if word != "server":
            out.append(replaced.get(word, line))
    out += [f"    server cp{i} 127.0.0.1:{p} check" for i, p in enumerate(backends)]
    return "\n".join(out) + "\n"


@dataclass
class Haproxy:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lines(self) -> int:
        """Lines in the access log so far (a mark for ``answered_by``)."""
        return len(self.log.read_text(errors="replace").splitlines())

    def answered_by(self, path_prefix: str, since: int = 0) -> collections.Counter[str]:
        """Requests for paths starting with *path_prefix* answered 200 or 304, by the backend server.

        Only log lines after the first *since* count.
        """
        counted: collections.Counter[str] = collections.Counter()
        for line in self.log.read_text(errors="replace").splitlines()[since:]:
            fields = line.split()
            # httplog: ... frontend backend/server Tq/Tw/Tc/Tr/Ta status bytes ... "METHOD PATH HTTP/1.1"
            at = next((i for i, f in enumerate(fields) if f.startswith("planes/")), None)
            if at is None or at + 2 >= len(fields) or f" {path_prefix}" not in line:
                continue
            if fields[at + 2] in ("200", "304"):
                counted[fields[at].split("/", 1)[1]] += 1
        return counted


@contextmanager
def running_haproxy(work: Path, backends: Sequence[int], port: int = 0) -> Iterator[Haproxy]:
    """HAProxy on loopback *port* (default: a free one) in front of *backends* (ports); stopped at the end."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        raise AssertionError("haproxy missing: run `make tools` (ci/tools.d/73-haproxy.sh)")
    port = port or free_port()
    cfg = work / "haproxy.cfg"
    cfg.write_text(config(port, backends))
    log = work / "haproxy.log"
    checked = subprocess.run([binary, "-c", "-f", str(cfg)], capture_output=True, text=True, check=False)
    assert 0 == checked.returncode, checked.stdout + checked.stderr
    with open(log, "ab") as out:
        proc = subprocess.Popen([binary, "-db", "-f", str(cfg)], stdout=out, stderr=subprocess.STDOUT)
    front = Haproxy(port, proc, log)

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"haproxy exited: {log.read_text()}")
        try:
            with urllib.request.urlopen(front.url + "/v1/health", timeout=2) as answer:
                return bool(200 == answer.status)
        except OSError:
            return False

    try:
        wait_until(up, f"haproxy not answering; log: {log}", 30, interval=0.1)
        yield front
    finally:
        stop_process(proc, grace=10)
