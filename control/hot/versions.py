"""The heat_template_version values Anneal accepts, and the check that a feature is not too new.

A template names a release date or, since newton, a release name; both map to the date
(``VERSIONS``). A function, section or key introduced later than the template's version is
refused, as Heat's per-version function tables do.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from control.hot.errors import TemplateError

DATES = (
    "2013-05-23",
    "2014-10-16",
    "2015-04-30",
    "2015-10-15",
    "2016-04-08",
    "2016-10-14",
    "2017-02-24",
    "2017-09-01",
    "2018-03-02",
    "2018-08-31",
    "2021-04-16",
)
RELEASES = {
    "newton": "2016-10-14",
    "ocata": "2017-02-24",
    "pike": "2017-09-01",
    "queens": "2018-03-02",
    "rocky": "2018-08-31",
    "wallaby": "2021-04-16",
}
VERSIONS: Mapping[str, str] = {**{d: d for d in DATES}, **RELEASES}
#: Conditions (the section, and the `condition` key of resources and outputs) came with newton.
CONDITIONS_SINCE = "2016-10-14"
#: The versions of CloudFormation-format templates (cfnformat.py): their functions are gated
#: there, by the format's own table, not by HOT's dates.
CFN_VERSIONS = frozenset({"2010-09-09", "2012-12-12"})
#: `if` with two arguments (a false condition drops the item it stands in) came with wallaby.
NULLABLE_IF_SINCE = "2021-04-16"


def canonical_version(raw: Any) -> str:
    """The date a template's ``heat_template_version`` stands for; raises if it is not accepted."""
    if isinstance(raw, datetime.date):
        raw = raw.isoformat()
    accepted = ", ".join([*DATES, *RELEASES])
    if raw is None:
        raise TemplateError("heat_template_version", f"is required; accepted: {accepted}")
    if not isinstance(raw, str) or raw not in VERSIONS:
        raise TemplateError("heat_template_version", f"{raw!r} is not supported; accepted: {accepted}")
    return VERSIONS[raw]


def check_version(what: str, since: str | None, version: str, path: str) -> None:
    """Refuse *what* (a function, section or key) in a template older than the version that brought it."""
    if since is not None and version < since and version not in CFN_VERSIONS:
        release = {date: name for name, date in RELEASES.items()}
        named = f"{since} ({release[since]})" if since in release else since
        raise TemplateError(
            path, f"{what} needs heat_template_version {named} or later; this template is {version}"
        )
