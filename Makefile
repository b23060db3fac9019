# The two commands of the README: `make demo` and `make test`. Both install first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install tools demo test lint bench clean package

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[control,dev]'
	touch $(STAMP)

# The real components the tests drive (puppet, salt, Swift, PostgreSQL, ...): ci/tools.d/.
tools: install
	bash ci/tools.sh

demo: install
	$(PY) examples/demo.py

test: install tools lint
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check agent control hooks tests examples bench
	$(VENV)/bin/mypy

# The agent's wheel and Debian package (packaging/build.sh; docs/operations.md) into dist/.
package: install
	bash packaging/build.sh dist

bench: install
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist
