"""The paths and module names docs/ and the README cite exist, so the docs lead somewhere."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
#: A repository path: a top-level folder of this project, then more of a path.
PATH = re.compile(r"(?<![\w./-])((?:control|agent|hooks|tests|bench|examples|packaging|ci|docs)/[\w./-]*\w)")
#: A dotted name inside backticks that starts with one of the shipped packages.
DOTTED = re.compile(r"`((?:control|agent|hooks)(?:\.[A-Za-z_]\w*)+)")
#: What runs write (git-ignored), cited as where to look for results.
GENERATED = ("bench/results",)


def _cited(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return [
        (f"{doc.name}:{n}", m.group(1).rstrip("."))
        for doc in DOCS
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        for m in pattern.finditer(line)
    ]


def _resolves(dotted: str) -> bool:
    """True when some prefix of *dotted* imports and the rest are attributes of it."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("doc", [d.name for d in DOCS])
def test_every_repository_path_a_doc_cites_exists(doc: str) -> None:
    """A path such as `control/engine/step.py` in a doc names a file or folder of this tree."""
    missing = [
        f"{where}: {path}"
        for where, path in _cited(PATH)
        if where.startswith(f"{doc}:")
        and not path.startswith(GENERATED)
        and not (ROOT / path).exists()
        and not (ROOT / f"{path}.py").exists()
    ]
    assert [] == missing


def test_every_dotted_name_the_docs_cite_imports() -> None:
    """A name such as `control.transports.store.Store` in backticks imports, attribute by attribute."""
    files = (".py", ".json", ".env", ".md", ".service", ".sls")
    missing = [f"{w}: {d}" for w, d in _cited(DOTTED) if not d.endswith(files) and not _resolves(d)]
    assert [] == missing
