# Quick start: `make demo` records a real job and takes it through the pipeline, `make test` runs the suite.
# Every target creates .venv and installs what it needs by itself; reruns install nothing new.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-quick lint docs proto bench bench-check clean

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py scripts/system_deps.sh $(wildcard src/chakra/_*.c src/chakra/_*.h) $(wildcard src/chakra/share/_*.c src/chakra/share/_*.h)
	bash scripts/system_deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m chakra.demo

test: $(STAMP) lint
	$(BIN)/python -m pytest -q

# everything but the tests that record live jobs or run outside binaries (markers set in
# tests/conftest.py), on every core: the tier for a change to the core
test-quick: $(STAMP)
	$(BIN)/python -m pytest -q -m "not live and not binaries" -n auto

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts examples docs/hooks
	$(BIN)/mypy

# the documentation site, built offline into site/ (strict: a broken link or a missing object fails)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

# the fast benchmarks against their targets: exit 1 on a MISS (benchmarks/check.py)
bench-check: $(STAMP)
	$(BIN)/python benchmarks/check.py

bench: $(STAMP)
	$(BIN)/python benchmarks/io_bench.py
	$(BIN)/python benchmarks/convert_bench.py
	$(BIN)/python benchmarks/sim_bench.py
	$(BIN)/python benchmarks/analyze_bench.py
	$(BIN)/python benchmarks/generate_bench.py
	$(BIN)/python benchmarks/adapt_bench.py
	$(BIN)/python benchmarks/xla_bench.py
	$(BIN)/python benchmarks/tf_bench.py
	$(BIN)/python benchmarks/share_bench.py
	$(BIN)/python benchmarks/synth_bench.py
	$(BIN)/python benchmarks/flexflow_bench.py
	$(BIN)/python benchmarks/kineto_bench.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info demo-output site src/chakra/*.so src/chakra/share/*.so
