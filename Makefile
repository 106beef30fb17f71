# opencode-bridge — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OPENCODE_VERSION := 1.18.33
OPENCODE_DIR := .opencode
OPENCODE_BIN := $(OPENCODE_DIR)/node_modules/.bin/opencode
PYTEST_ARGS ?=
# `make test` runs the tests on this many processes (pytest-xdist; each has its own embedded PostgreSQL).
PYTEST_WORKERS ?= 2

.PHONY: chromium systemd-analyze promtool run demo test tsclient test-unit test-integration test-migration test-e2e lint bench soak opencode venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# opencode serve 1.18.33 from npm, into a project-local folder (never global).
opencode: $(OPENCODE_BIN)

$(OPENCODE_BIN):
	mkdir -p $(OPENCODE_DIR)
	cd $(OPENCODE_DIR) && npm install --no-audit --no-fund --loglevel=error opencode-ai@$(OPENCODE_VERSION)
	$(OPENCODE_BIN) --version | grep -qx '$(OPENCODE_VERSION)'

# Headless Chromium for tests/e2e/test_fanout_viewer.py (Debian package; root or sudo).
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends chromium; }

# systemd-analyze for tests/unit/test_ops_unit_file.py (Debian package `systemd`; root or sudo).
systemd-analyze:
	@command -v systemd-analyze >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends systemd; }

# promtool for tests/unit/test_deploy_monitoring.py (Debian package `prometheus`; root or sudo).
promtool:
	@command -v promtool >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends prometheus; }

# Runs the daemon in the foreground. Without BRIDGE_DATABASE_URL it starts an embedded PostgreSQL
# under $BRIDGE_STATE_DIR (default ./.state) and applies migrations.
run: $(STAMP)
	$(BIN)/opencode-bridge run

# See it work in a minute: an embedded PostgreSQL, opencode serve 1.18.33 wired to the scripted mock
# model, the bridge, a short scripted conversation; prints the viewer URL. Ctrl-C stops everything.
DEMO_ARGS ?=
demo: $(STAMP) $(OPENCODE_BIN)
	OPENCODE_BIN=$(abspath $(OPENCODE_BIN)) $(BIN)/python -m bench.demo $(DEMO_ARGS)

# The TypeScript package clients/typescript/ (@opencode-bridge/client): npm ci from its lockfile, the REST client
# regenerated from bridge/http/openapi.json (fails when the committed src/gen/ differs), tsc, vitest, the build,
# and the viewer's copy of the browser bundle checked against it. Without npm: fails under CI=true, skipped
# (said so) elsewhere.
TSCLIENT := clients/typescript
$(TSCLIENT)/node_modules/.ci-stamp: $(TSCLIENT)/package-lock.json
	cd $(TSCLIENT) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

tsclient:
	@if ! command -v npm >/dev/null; then \
	  if [ "$$CI" = true ]; then echo "npm is missing: the TypeScript package cannot be tested" >&2; exit 1; fi; \
	  echo "npm is missing: skipping the TypeScript package (clients/typescript/)"; exit 0; fi; \
	$(MAKE) --no-print-directory $(TSCLIENT)/node_modules/.ci-stamp && cd $(TSCLIENT) && \
	node scripts/check-generated.mjs && npx tsc -p tsconfig.test.json && npx vitest run && npm run --silent build && \
	node scripts/check-viewer-copy.mjs

# Every test: unit (pure), integration (real PostgreSQL), migration (schema), e2e (real opencode serve + mock provider),
# and the TypeScript package first.
test: $(STAMP) $(OPENCODE_BIN) chromium systemd-analyze promtool tsclient
	OPENCODE_BIN=$(abspath $(OPENCODE_BIN)) $(BIN)/pytest -q -ra -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

test-unit: $(STAMP) systemd-analyze promtool
	$(BIN)/pytest -q tests/unit $(PYTEST_ARGS)

test-integration: $(STAMP)
	$(BIN)/pytest -q tests/integration $(PYTEST_ARGS)

test-migration: $(STAMP)
	$(BIN)/pytest -q tests/migration $(PYTEST_ARGS)

test-e2e: $(STAMP) $(OPENCODE_BIN) chromium
	OPENCODE_BIN=$(abspath $(OPENCODE_BIN)) $(BIN)/pytest -q -ra tests/e2e $(PYTEST_ARGS)

# Benchmarks (not part of `make test`): numbers for BENCHMARKS.md; every row of its targets measured on the whole
# daemon as an operator runs it (`opencode-bridge run`, its workers included). First the daemon on the real wire
# (bench.wire: a fake serve process, the real daemon) with BRIDGE_WORKERS=1 then 2 in one run, the ratio printed
# (ingest / COPY, CPU per event, two workers over one); the replay of v2 and legacy sessions; 10,000 clients
# reconnecting and their live delivery with two workers (bench.storm); the idle CPU of 10,000 warm sessions per
# worker set, one worker and two (bench.idle_cpu --workers); last sessions created, extended and released for
# 15 minutes (bench.churn; its RSS plot into docs/churn-rss.png). Each exits non-zero unless what was stored equals
# the upstream's log. About 50 minutes on 2 shared cores (BENCHMARKS.md "Workers").
bench: $(STAMP) $(OPENCODE_BIN)
	$(BIN)/python -m bench.wire_workers --workers 1,2 --sessions 1000 --events 20 --burst 20
	$(BIN)/python -m bench.hotpath
	$(BIN)/python -m bench.write_path --sessions 1000 --events 20
	$(BIN)/python -m bench.wire_stages --sessions 1000 --events 20 --burst 20
	$(BIN)/pytest -q -s tests/integration/test_lifecycle_memory.py
	$(BIN)/python -m bench.ingest --events 5000 --sessions 20
	$(BIN)/pytest -q -s tests/integration/test_fanout_latency.py
	$(BIN)/pytest -q -s tests/hostile/test_load.py
	OPENCODE_BIN=$(abspath $(OPENCODE_BIN)) $(BIN)/python -m bench.commands --prompts 20
	$(BIN)/python -m bench.replay --rounds 3
	$(BIN)/python -m bench.storm --clients 10000 --sessions 1000 --workers 2
	$(BIN)/python -m bench.storm --only 10000 --sessions 1000 --long 0 --workers 2 --deploy --deploy-overlap --steady 10
	$(BIN)/python -m bench.idle_cpu --workers 1,2 --sessions 10000 --seconds 30
	$(MAKE) --no-print-directory tsclient && node $(TSCLIENT)/scripts/bench-reducer.mjs 20000 15
	$(BIN)/python -m bench.churn --minutes 15 --plot docs/churn-rss.png

# Long fault soak against the real opencode serve (not part of `make test`): SOAK_MINUTES=10 by default,
# on a primary and a streaming standby with a failover fault (SOAK_ARGS= for one embedded PostgreSQL).
SOAK_MINUTES ?= 10
SOAK_ARGS ?= --failover
soak: $(STAMP) $(OPENCODE_BIN)
	OPENCODE_BIN=$(abspath $(OPENCODE_BIN)) $(BIN)/python -m bench.soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

lint: $(STAMP)  # ruff, mypy --strict, and the import layers (pyproject.toml [tool.importlinter])
	$(BIN)/ruff check bridge tests bench
	$(BIN)/mypy bridge
	$(BIN)/lint-imports --no-logo

clean:
	rm -rf $(VENV) $(OPENCODE_DIR) .pytest_cache .mypy_cache .ruff_cache
