# Everything installs from the package registries into .venv; nothing is assumed present
# beyond Python 3.11 (and Java 17 for Spark).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: install demo test lint typecheck pytest bench fuzz clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The demo needs only the embedded default engine; the tests need every engine.
$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[duckdb]"
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[all,dev]"
	touch $(STAMP) $(DEMO_STAMP)

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/pruner demo

lint: $(STAMP)
	$(VENV)/bin/ruff check pruner tests bench
	$(VENV)/bin/ruff format --check pruner tests bench
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(PY) -m pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(PY) bench/build_throughput.py
	$(PY) bench/point_lookup.py

# The differential harness with new random cases: FUZZ_CASES split across DuckDB,
# DataFusion and Spark (tests/end_to_end/test_differential.py FUZZ_SHARE); prints
# per-engine counts.
FUZZ_CASES ?= 20000
fuzz: $(STAMP)
	PRUNER_FUZZ_CASES=$(FUZZ_CASES) $(PY) -m pytest -q -p no:cacheprovider tests/end_to_end/test_differential.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
