# Two commands matter: `make demo` (set up + solve an example) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test fuzz lint bench bench-rounds clean

$(BIN)/whale-opt: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

setup: $(BIN)/whale-opt

demo: setup
	$(BIN)/whale-opt solve instances/small/two-racks-mixed.json -o demo-decision.json
	$(BIN)/whale-opt check instances/small/two-racks-mixed.json demo-decision.json

test: setup
	$(BIN)/pytest

# The property tests with fresh random examples (the suite's are fixed): run it
# now and then, and turn what it finds into a test.
fuzz: setup
	HYPOTHESIS_PROFILE=explore $(BIN)/pytest

lint: setup
	$(BIN)/ruff check whale_opt tests bench
	$(BIN)/ruff format --check whale_opt tests bench
	$(BIN)/mypy

bench: setup
	$(BIN)/python bench/report.py

bench-rounds: setup
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) demo-decision.json .pytest_cache .mypy_cache .ruff_cache
