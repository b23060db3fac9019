# The two commands of the README: `make demo` and `make test`. Both install first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[control,dev]'
	touch $(STAMP)

demo: install
	$(PY) examples/demo.py

test: install lint
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check agent control hooks tests examples bench
	$(VENV)/bin/mypy

bench: install
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
