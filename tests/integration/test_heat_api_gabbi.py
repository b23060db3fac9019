"""Heat's own API tests, the gabbi files of heat-tempest-plugin from PyPI, run unchanged against Anneal's Heat API."""

from __future__ import annotations

from pathlib import Path

from tests.support.controlplane import stop_control_plane
from tests.support.openstack import run_heat_gabbits, start_heat_plane


def test_every_heat_tempest_gabbi_test_passes(tmp_path: Path) -> None:
    """Every request of heat-tempest-plugin's gabbi files (stacks, resources, environments, software configs and
    deployments, resource types, templates) gets the status and body Heat's tests expect."""
    cp, url = start_heat_plane(tmp_path)
    try:
        outcomes = run_heat_gabbits(cp, url, "api-gabbi")
    finally:
        stop_control_plane(cp)
    ran = len(outcomes["passed"]) + len(outcomes["failed"]) + len(outcomes["skipped"])
    print(f"\nheat-tempest-plugin gabbi: {len(outcomes['passed'])} of {ran} passed")
    assert outcomes["failed"] == {} and outcomes["skipped"] == {}
    files = {name.split("_", 1)[0] for name in outcomes["passed"]}
    assert files == {"environments", "resources", "resourcetypes", "softwareconfig", "stacks", "templates"}
    assert len(outcomes["passed"]) >= 40  # heat-tempest-plugin 3.0.0 has 47
