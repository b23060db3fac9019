"""Run Heat's own API tests (heat-tempest-plugin's gabbi files) against a Heat endpoint; print each outcome.

Run by the gabbi virtualenv's Python (ci/tools.d/81-gabbi.sh), not imported by tests:
``python heat_gabbi.py ENDPOINT GABBITS_DIR`` with OS_TOKEN and PREFIX in the environment,
as heat-tempest-plugin's own loader sets them. Prints one JSON object:
``{"passed": [names], "failed": {name: reason}, "skipped": {name: reason}}``.
"""

from __future__ import annotations

import json
import sys
import unittest
from typing import Any

from gabbi import driver, fixture


class AuthenticationFixture(fixture.GabbiFixture):  # type: ignore[misc]
    """heat-tempest-plugin's fixture gets a Keystone token into OS_TOKEN: the caller has put one there."""

    def start_fixture(self) -> None:
        """Nothing to fetch: OS_TOKEN is the endpoint's token already."""

    def stop_fixture(self) -> None:
        """Nothing to release."""


class Outcomes(unittest.TestResult):
    """Every test's outcome by name, the reason kept for those that did not pass."""

    def __init__(self) -> None:
        super().__init__()
        self.passed: list[str] = []
        self.failed: dict[str, str] = {}
        self.skipped_by: dict[str, str] = {}

    def addSuccess(self, test: Any) -> None:
        self.passed.append(_name(test))

    def addFailure(self, test: Any, err: Any) -> None:
        self.failed[_name(test)] = str(err[1]).strip().splitlines()[0][:400]

    def addError(self, test: Any, err: Any) -> None:
        self.failed[_name(test)] = f"{err[0].__name__}: {str(err[1]).strip()[:400]}"

    def addSkip(self, test: Any, reason: str) -> None:
        self.skipped_by[_name(test)] = reason


def _name(test: Any) -> str:
    """gabbi's name for a test: its file's stem and the test's name, lowercased with '_' (unique in a run)."""
    return type(test).__name__


def main(endpoint: str, gabbits: str) -> None:
    loader = unittest.TestLoader()
    suite = driver.build_tests(
        gabbits, loader, url=endpoint, test_loader_name="heat_gabbi", fixture_module=sys.modules[__name__]
    )
    outcomes = Outcomes()
    suite.run(outcomes)
    ran = len(outcomes.passed) + len(outcomes.failed) + len(outcomes.skipped_by)
    print(f"heat-tempest-plugin gabbi: {len(outcomes.passed)} of {ran} passed", file=sys.stderr)
    print(json.dumps({"passed": outcomes.passed, "failed": outcomes.failed, "skipped": outcomes.skipped_by}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
