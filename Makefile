PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test check lint types mutate demo bench docs clean system-packages ui-vendor

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	touch $(STAMP)

# Debian packages the tests' real services need (postgresql, chromium): apt-get runs only when
# one is missing.
system-packages:
	$(PYTHON) scripts/ensure_system_packages.py

# The whole suite in one session on 2 workers (pytest-xdist): the default store is SQLite,
# tests/store and tests/gates run on every store by themselves, and the suites that run plays
# on the store run again on PostgreSQL and on memory (--every-store-in). Each worker has its
# own PostgreSQL, Temporal dev server and simulator (services.py: free ports, temp dirs).
STORE_SUITES := tests/engine tests/durability tests/boundaries tests/gateway
WORKERS ?= 2

test: system-packages $(STAMP)
	$(BIN)/pytest -n $(WORKERS) --dist worksteal $(addprefix --every-store-in=,$(STORE_SUITES))

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/lint-imports

types: $(STAMP)
	$(BIN)/mypy

check: system-packages lint types test

# Mutation tests of the invariants: each mutant of scripts/mutants.py (a plausible bug in the
# engine or the store) applied to a copy of src/, against the tests that must kill it; exits
# non-zero if one survives. About 2.5 min on 2 busy cores.
mutate: $(STAMP)
	$(BIN)/python scripts/mutate.py

demo: $(STAMP)
	$(BIN)/playline demo --store sqlite:///.playline/demo.db

# The web UI's vendored AG Grid build (pinned in ui/package-lock.json), its licence and checksum.
# Only for upgrading it: pip install and make test use the committed files, never Node.
VENDOR := src/playline/web/static/vendor
ui-vendor:
	cd ui && npm ci --no-audit --no-fund && npm run build
	cp ui/node_modules/ag-grid-community/LICENSE.txt $(VENDOR)/ag-grid.LICENSE.txt
	cd $(VENDOR) && sha256sum ag-grid.min.js > SHA256SUMS

bench: $(STAMP)
	$(BIN)/python -m bench

# The users' documentation: the CLI page regenerated from --help, then the site, into site/.
docs: $(STAMP)
	$(BIN)/python scripts/gen_cli_docs.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .playline .mypy_cache .ruff_cache
