# The two commands of the README: `make demo` and `make test`. Both install first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SOURCES := agent control hooks tests examples bench

.PHONY: install compile tools demo test unit check fmt lint bench bench-long clean package revision ui-screenshots

install: $(STAMP)

# The project's own modules byte-compiled (only what changed since the last run). Where
# PYTHONDONTWRITEBYTECODE is set, as on our CI machines, Python writes no bytecode when it imports
# them, so without this every `anneal serve`, agent and CLI process the tests and the demo start
# compiles them from source again: 0.5-0.7 s of CPU a control plane (docs/performance.md).
compile: install
	$(PY) -m compileall -q $(SOURCES)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[control,dev]'
	touch $(STAMP)

# The real components the tests drive (puppet, salt, Swift, PostgreSQL, ...): ci/tools.d/.
tools: install
	bash ci/tools.sh

demo: compile
	$(PY) examples/demo.py

# The suite mostly waits on the processes it starts: WORKERS xdist workers share a 2-core
# machine. Whole modules go to workers, longest first (FIRST in tests/conftest.py).
WORKERS ?= 4

test: compile tools lint
	$(PY) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

# The inner loop: the unit tier alone (about 20 s), and lint + unit before a commit.
unit: compile
	$(PY) -m pytest tests/unit

check: lint unit

fmt: install
	$(VENV)/bin/ruff check --fix-only --quiet $(SOURCES)
	$(VENV)/bin/ruff format $(SOURCES)

lint: install
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check $(SOURCES)
	$(VENV)/bin/ruff format --check $(SOURCES)
	$(VENV)/bin/mypy

# The web view's screenshots in docs/ui/, made by its browser test (docs/ui.md shows them).
ui-screenshots: install tools
	UI_SCREENSHOTS=docs/ui $(PY) -m pytest tests/integration/test_ui_browser.py -q

# A draft schema revision for what changed in control/store/orm.py: make revision m="what changed"
# (control/store/migrations/README.md says what to check in it).
revision: install
	$(PY) -m control.store.migrations "$(m)"

# The agent's wheel and Debian package (packaging/build.sh; docs/operations.md) into dist/.
package: install
	bash packaging/build.sh dist

bench: install
	$(PY) bench/run.py

bench-long: install tools
	$(PY) bench/run.py --long

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist
