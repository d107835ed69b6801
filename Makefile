# stratagem: `make run` sets up and runs the main job; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-fast bench golden lint

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

# main job: SEPO evaluation of a rule-based agent on each of the five games
run: setup
	for spec in ipd:TitForTat auction:Truthful negotiation:FairSplit multi_issue:FairNeg kuhn:NashApprox; do \
		$(BIN)/stratagem eval --game $${spec%%:*} --agent strategy:$${spec#*:} || exit 1; \
	done

test: setup
	$(BIN)/pytest

bench: setup
	$(BIN)/python benchmarks/run.py

golden: setup
	$(BIN)/python tests/golden/regenerate.py

lint: setup
	$(BIN)/ruff check src tests benchmarks
