"""Heat's own agent chain, run for real with every server path redirected under a work dir.

os-collect-config -> os-refresh-config -> 20-os-apply-config + 55-heat-config -> the script
hook -> heat-config-notify, from `ci/tools.d/60-heat-agents.sh` (PyPI packages in their own
venv plus the heat-agents sdist). `shared/reference/heat-chain.md` lists every path and the
variable that moves it; this module lays out the work dir like a server's root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.processes import ROOT

TOOLS = ROOT / ".venv" / "tools" / "heat-chain"
VENV = TOOLS / "venv"
SDIST = TOOLS / "sdist"


def require_heat_agents() -> None:
    """Fail (not skip) when the chain is not installed, naming the command that installs it."""
    missing = [
        p
        for p in (VENV / "bin" / "os-collect-config", SDIST / "heat-config" / "bin" / "heat-config-notify")
        if not p.exists()
    ]
    if missing:
        raise AssertionError(f"Heat's agent chain is missing ({missing[0]}): run `make tools`")


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


def _mount_ns_works() -> bool:
    try:
        return (
            subprocess.run(["unshare", "--mount", "true"], check=False, capture_output=True).returncode == 0
        )
    except OSError:
        return False


@dataclass
class HeatChain:
    """One server's worth of Heat's agent chain under *work*."""

    work: Path

    def setup(self) -> HeatChain:
        require_heat_agents()
        w = self.work
        for d in (
            "bin",
            "etc",
            "tmp",
            "var/log",
            "var/run/heat-config",
            "var/lib/heat-config/deployed",
            "var/lib/os-collect-config/local-data",
            "var/run/os-collect-config",
        ):
            (w / d).mkdir(parents=True, exist_ok=True)
        os.chmod(w / "var/lib/os-collect-config/local-data", 0o700)
        elem = SDIST / "heat-config"
        confd = w / "usr/libexec/os-refresh-config/configure.d"
        _link(elem / "os-refresh-config/configure.d/20-os-apply-config", confd / "20-os-apply-config")
        _link(elem / "os-refresh-config/configure.d/55-heat-config", confd / "55-heat-config")
        templates = w / "usr/libexec/os-apply-config/templates"
        if templates.exists() or templates.is_symlink():
            if templates.is_symlink():
                templates.unlink()
            else:
                shutil.rmtree(templates)
        templates.parent.mkdir(parents=True, exist_ok=True)
        templates.symlink_to(elem / "os-apply-config")
        _link(elem / "bin/heat-config-notify", w / "usr/bin/heat-config-notify")
        _link(SDIST / "heat-config-script/install.d/hook-script.py", w / "var/lib/heat-config/hooks/script")
        self._write_apply_config_shim()
        return self

    def _write_apply_config_shim(self) -> None:
        """os-apply-config writes under the work dir; as root it also opens /var/log/os-apply-config.log."""
        w, real = self.work, VENV / "bin" / "os-apply-config"
        if os.geteuid() == 0 and _mount_ns_works():
            body = (
                f'exec unshare --mount sh -c \'mount --bind "{w}/var/log" /var/log && '
                f'exec "{real}" --output "{w}" "$@"\' os-apply-config "$@"\n'
            )
        elif os.geteuid() == 0:  # no mount namespaces: hide the euid from that one check
            body = (
                f'exec "{VENV}/bin/python" -c "import os, sys; os.geteuid = lambda: 65534; '
                f'from os_apply_config.apply_config import main; sys.exit(main())" --output "{w}" "$@"\n'
            )
        else:
            body = f'exec "{real}" --output "{w}" "$@"\n'
        shim = w / "bin" / "os-apply-config"
        shim.write_text("#!/bin/sh\n" + body)
        shim.chmod(0o755)

    def env(self) -> dict[str, str]:
        w = self.work
        env = dict(os.environ)
        for key in [k for k in env if k.startswith(("ANNEAL_", "VIRTUAL_ENV"))]:
            env.pop(key)
        env.update(
            {
                "PATH": f"{w}/bin:{VENV}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}",
                "OS_REFRESH_CONFIG_BASE_DIR": f"{w}/usr/libexec/os-refresh-config",
                "OS_CONFIG_APPLIER_TEMPLATES": f"{w}/usr/libexec/os-apply-config/templates",
                "OS_CONFIG_FILES_PATH": f"{w}/var/lib/os-collect-config/os_config_files.json",
                "HEAT_SHELL_CONFIG": f"{w}/var/run/heat-config/heat-config",
                "HEAT_CONFIG_HOOKS": f"{w}/var/lib/heat-config/hooks",
                "HEAT_CONFIG_DEPLOYED": f"{w}/var/lib/heat-config/deployed",
                "HEAT_CONFIG_DEPLOYED_OLD": f"{w}/var/run/heat-config/deployed",
                "HEAT_CONFIG_NOTIFY": f"{w}/usr/bin/heat-config-notify",
                "HEAT_SCRIPT_WORKING": f"{w}/var/lib/heat-config/heat-config-script",
                "HEAT_SCRIPT_OUTPUTS": f"{w}/var/run/heat-config/heat-config-script",
                "TMPDIR": f"{w}/tmp",
                # The local collector saves and restores the locale: it must be one that exists.
                "LC_ALL": "C",
                "LANG": "C",
            }
        )
        return env

    def argv(self, metadata_url: str, *, once: bool = False, interval: int = 1) -> list[str]:
        """os-collect-config with collectors `request` and `local`, as Heat's document names them."""
        w = self.work
        mode = (
            ["--one-time"] if once else ["--polling-interval", str(interval), "--min-polling-interval", "1"]
        )
        return [
            str(VENV / "bin" / "os-collect-config"),
            *mode,
            "--cachedir",
            f"{w}/var/lib/os-collect-config",
            "--backup-cachedir",
            f"{w}/var/run/os-collect-config",
            "--config-file",
            "/dev/null",
            "--command",
            f"os-refresh-config --lockfile {w}/var/run/os-refresh-config.lock",
            "--request-metadata-url",
            metadata_url,
            "--local-path",
            f"{w}/var/lib/os-collect-config/local-data",
            "request",
            "local",
        ]

    def bootstrap(self, os_collect_config: dict[str, Any]) -> None:
        """Heat's bootstrap from the template alone: the server's ``os_collect_config`` attribute
        dropped into the local collector's directory, os-collect-config configured for `local` only.

        The first run renders /etc/os-collect-config.conf from it (heat-config's os-apply-config
        template); os-collect-config sees its config file change and re-execs with the transport
        the attribute names.
        """
        local = self.work / "var/lib/os-collect-config/local-data/bootstrap.json"
        local.write_text(json.dumps({"os-collect-config": os_collect_config}))
        local.chmod(0o600)
        (self.work / "etc/os-collect-config.conf").write_text("[DEFAULT]\ncollectors = local\n")

    def bootstrap_argv(self, *, interval: int = 1) -> list[str]:
        """os-collect-config reading its collectors from the config file os-apply-config renders."""
        w = self.work
        return [
            str(VENV / "bin" / "os-collect-config"),
            "--polling-interval",
            str(interval),
            "--min-polling-interval",
            "1",
            "--cachedir",
            f"{w}/var/lib/os-collect-config",
            "--backup-cachedir",
            f"{w}/var/run/os-collect-config",
            "--config-file",
            f"{w}/etc/os-collect-config.conf",
            "--command",
            f"os-refresh-config --lockfile {w}/var/run/os-refresh-config.lock",
            "--local-path",
            f"{w}/var/lib/os-collect-config/local-data",
        ]

    def deployed(self) -> list[str]:
        """Derived config ids the chain has started (its marker files)."""
        d = self.work / "var/lib/heat-config/deployed"
        return sorted(
            p.name[: -len(".json")] for p in d.glob("*.json") if not p.name.endswith(".notify.json")
        )
