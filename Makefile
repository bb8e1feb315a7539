# Everything installs from the package registries into .venv; nothing is assumed present
# beyond Python 3.11 (and Java 17 for Spark).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[all,dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/pruner demo

lint: $(STAMP)
	$(VENV)/bin/ruff check pruner adapters tests bench
	$(VENV)/bin/ruff format --check pruner adapters tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(PY) -m pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(PY) bench/build_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
