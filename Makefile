# Everything installs from the package registries into .venv; nothing is assumed present
# beyond Python 3.11 (and Java 17 for Spark).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: install demo test lint typecheck pytest bench bench-quick bench-store fuzz mutate clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The demo needs only the embedded default engine; the tests need every engine.
# setuptools 84 notes "Editable installation." on every editable install, a notice and not a
# problem: that one message is silenced, every other warning shows. An editable install
# compiles no bytecode (pip does for a wheel): compileall does, or a process whose
# environment sets PYTHONDONTWRITEBYTECODE compiles pruner from source on every start.
PIP_INSTALL := PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install --quiet

$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PIP_INSTALL) -e ".[duckdb]"
	$(PY) -m compileall -q pruner
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(PY)
	$(PIP_INSTALL) -e ".[all,dev]"
	$(PY) -m compileall -q pruner
	touch $(STAMP) $(DEMO_STAMP)

# A build's loops compiled ahead of time (pruner/kernels.py: numba.pycc, a C compiler, about 5
# s), so a new process's build imports no Numba (0.36 s). Where they cannot be compiled, builds
# compile them just in time as before: a warning, not a failed install; tried again next time.
LOOPS := $(VENV)/.loops-compiled
$(LOOPS): pruner/loops.py pruner/kernels.py | $(DEMO_STAMP)
	$(PY) -m pruner.kernels && touch $(LOOPS) || echo "pruner: WARNING: the build's loops were not compiled ahead of time; builds compile them with Numba (0.4 s more a process)"

# Azurite (Microsoft's Azure Blob Storage emulator, from the npm registry with the machine's
# Node.js): the tests' az:// server, as moto's is their S3 one.
AZURITE := tests/support/azurite/node_modules/.package-lock.json
$(AZURITE): tests/support/azurite/package-lock.json
	cd tests/support/azurite && npm ci --no-audit --no-fund --loglevel=error
	touch $(AZURITE)

install: $(STAMP) $(AZURITE) $(LOOPS)

demo: $(DEMO_STAMP) $(LOOPS)
	$(VENV)/bin/pruner demo

lint: $(STAMP)
	$(VENV)/bin/ruff check pruner tests bench
	$(VENV)/bin/ruff format --check pruner tests bench
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP) $(AZURITE) $(LOOPS)
	$(PY) -m pytest -q

test: lint typecheck pytest

# pruner against each engine alone (bench/compare.py), written to docs/benchmarks.md with its
# plots: `bench` at 1M, 5M and 20M rows (the 20M data takes a long time to generate, once),
# `bench-quick` at 200k and 1M rows in a few minutes. Then the index build's throughput.
# `make bench SCALE=1` adds bench/scale.py (5M to 100M rows against Lance, docs/scale.md:
# about 20 minutes, 8 GB of data). `make bench STORE=1` adds bench-store (object storage with 0/30/100 ms per request, about
# 14 minutes at 5M rows on 2 cores: not run by default).
bench: $(STAMP) $(LOOPS)
	$(PY) bench/compare.py
	$(PY) bench/cold.py --rows 1000000 5000000
	$(PY) bench/build_throughput.py
	$(if $(SCALE),$(PY) bench/scale.py)
	$(if $(STORE),$(PY) -m bench.store)

# pruner on an object store (moto's S3 server behind a proxy adding 0, 30, 100 ms per request)
# against the engines alone, 5M rows; STORE_ARGS=--quick: 1M rows in about 3 minutes. Prints
# its tables (docs/benchmarks-store.md holds a run's, with what they show).
STORE_ARGS ?=
bench-store: $(STAMP) $(LOOPS)
	$(PY) -m bench.store $(STORE_ARGS)

bench-quick: $(STAMP) $(LOOPS)
	$(PY) bench/compare.py --quick
	$(PY) bench/cold.py --rows 1000000 --repeat 6

# The differential harness with new random cases: FUZZ_CASES split across DuckDB,
# DataFusion and Spark (tests/end_to_end/test_differential.py FUZZ_SHARE); prints
# per-engine counts. The whole output (a mismatch's report and hypothesis's reproduction
# blob) is also kept in fuzz.log: a long run must not lose its one failure to a cut terminal.
FUZZ_CASES ?= 20000
fuzz: $(STAMP)
	PRUNER_FUZZ_CASES=$(FUZZ_CASES) bash -o pipefail -c '$(PY) -m pytest -q \
		-p no:cacheprovider tests/end_to_end/test_differential.py 2>&1 | tee fuzz.log'

# Mutation testing of the safety-critical modules (not part of `make test`; slow: run it in the
# background). Configured in pyproject.toml [tool.mutmut]; results in mutants/ (mutmut results,
# mutmut show NAME), summarised in docs/mutation.md. MUTANTS narrows it: one module's mutants
# (make mutate MUTANTS='pruner.binding.*'), or one function's. The default list takes from
# pruner/table/ only the binding of an index to the files and fragments it covers (Table._fit,
# _parquet_ids, _file_ids, _overlapping, _unexplained_gaps, TableIndex.coverage, _load_key),
# what forms a table (open_table, _open_dataset, _lance_table, _parquet_table, as_table,
# Table._load, _lance_ids, default_zones), from pruner/expressions.py only negation (not_,
# _Negate, rewrite_not) and from pruner/discover.py the file identities (FileIdentity.matches,
# read_footer, read_parquet_file, signature) and which files form a table (parquet_names,
# hive_partitioned) and pruner/storage/'s listing (walk_files).
MUTANTS ?= 'pruner.binding.*' 'pruner.selection.*' 'pruner.evaluate.*' 'pruner.join_keys.*' \
	'pruner.expressions.x_not_*' 'pruner.expressions.*_Negate*' \
	'pruner.expressions.*_RewriteNot*' 'pruner.expressions.x_rewrite_not*' \
	'pruner.analysis.scopes.*' 'pruner.analysis.joins.*' 'pruner.analysis.pushdown.*' \
	'pruner.analysis.nulls.*' 'pruner.analysis.conditions.*' \
	'pruner.literals.*' 'pruner.literal_text.*' 'pruner.arithmetic.*' \
	'pruner.table.model.*_fit__mutmut_*' \
	'pruner.table.model.*_parquet_ids__mutmut_*' \
	'pruner.table.model.*_unexplained_gaps__mutmut_*' 'pruner.table.model.x__file_ids__mutmut_*' \
	'pruner.table.model.x__overlapping__mutmut_*' \
	'pruner.table.bound.*TableIndex*coverage__mutmut_*' \
	'pruner.table.model.*Table*_load_key__mutmut_*' \
	'pruner.table.opening.x__parquet_table__mutmut_*' \
	'pruner.discover.*FileIdentity*matches__mutmut_*' 'pruner.discover.x_read_footer__mutmut_*' \
	'pruner.discover.x_read_parquet_file__mutmut_*' 'pruner.discover.x_signature__mutmut_*' \
	'pruner.table.opening.x_open_table__mutmut_*' \
	'pruner.table.opening.x__open_dataset__mutmut_*' \
	'pruner.table.opening.x__lance_table__mutmut_*' 'pruner.table.cache.x_as_table__mutmut_*' \
	'pruner.table.model.*Table*_load__mutmut_*' 'pruner.table.model.*Table*_lance_ids__mutmut_*' \
	'pruner.table.model.*Table*default_zones__mutmut_*' \
	'pruner.discover.x_parquet_names__mutmut_*' \
	'pruner.storage.listing.x_walk_files__mutmut_*' 'pruner.discover.x_hive_partitioned__mutmut_*' \
	'pruner.index.hierarchy.*' 'pruner.index.native.*' 'pruner.index.update.*' \
	'pruner.index.keys.*' 'pruner.index.lance.*' 'pruner.lookup.*'
MUTATE_CHILDREN ?= 2
mutate: $(STAMP)
	$(VENV)/bin/mutmut run --max-children $(MUTATE_CHILDREN) $(MUTANTS)
	$(VENV)/bin/mutmut results

clean:
	rm -rf mutants $(VENV) .pytest_cache .mypy_cache .ruff_cache
