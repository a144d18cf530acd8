# The two commands the README opens with: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck bench setup clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,postgres]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/ctxledger --db demo.ledger.db demo

test: $(STAMP)
	$(BIN)/ruff check ctxledger tests bench
	$(BIN)/mypy
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check ctxledger tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) demo.ledger.db* .pytest_cache .mypy_cache .hypothesis
