# Sundial developer entry points. Every target bootstraps what it needs and is idempotent.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CDK := node_modules/.bin/cdk
LAMBDA_DEPS := build/lambda-deps
# jsii (used by aws-cdk-lib) prints a Node-20 end-of-life banner on every start. The variable
# takes a list of Node major versions to stay quiet about.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# Lambda runtime and architecture: must match stacks/settings.py (LAMBDA_RUNTIME / LAMBDA_ARCH);
# a test checks that they agree.
LAMBDA_PYTHON_VERSION := 3.13
LAMBDA_PLATFORM := manylinux2014_aarch64

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' \
		'{ name[NR] = $$1; text[NR] = $$2; if (length($$1) > width) width = length($$1) } \
		END { for (i = 1; i <= NR; i++) printf "  %-" width "s  %s\n", name[i], text[i] }'

$(VENV)/.installed: requirements.lock pyproject.toml
	@echo "==> [1/3] Python packages into $(VENV) (first run: a few minutes; later runs skip this)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

node_modules/.installed: package.json package-lock.json
	@echo "==> [2/3] the CDK CLI (npm ci)"
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The dependencies layer: the pinned runtime deps, as wheels for the Lambda platform.
$(LAMBDA_DEPS)/.installed: requirements-lambda.lock $(VENV)/.installed
	@echo "==> [3/3] the Lambda dependencies layer ($(LAMBDA_PLATFORM), Python $(LAMBDA_PYTHON_VERSION))"
	rm -rf $(LAMBDA_DEPS)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps \
		--platform $(LAMBDA_PLATFORM) --python-version $(LAMBDA_PYTHON_VERSION) \
		--implementation cp --only-binary=:all: \
		--target $(LAMBDA_DEPS)/python -r requirements-lambda.lock
	touch $@

.PHONY: deps
deps: $(VENV)/.installed node_modules/.installed $(LAMBDA_DEPS)/.installed ## Install pinned Python deps, the CDK CLI and the Lambda deps layer

.PHONY: lint
lint: $(VENV)/.installed ## ruff + mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

.PHONY: synth
synth: deps ## Synthesize the CDK app into cdk.out (offline)
	@echo "==> cdk synth (offline, with cdk-nag)"
	$(CDK) synth --quiet

.PHONY: cfn-lint
cfn-lint: synth ## cfn-lint the synthesized templates
	$(VENV)/bin/cfn-lint cdk.out/*.template.json

.PHONY: openapi
openapi: $(VENV)/.installed ## Regenerate openapi.json from the code
	$(PY) -m sundial.api.openapi > openapi.json

# The admin UI's browser tests (tests/ui) drive Debian's chromium; Playwright's own browser
# download is never used. Installed with apt where we may (root, or passwordless sudo); without
# it those tests skip and say why.
.PHONY: chromium
chromium: ## Install Debian's chromium for the admin UI's browser tests (if missing and allowed)
	@if command -v chromium >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	else echo "==> no chromium, and no root or passwordless sudo to install it: the UI's browser tests will skip"; exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then echo "==> no chromium and no apt-get: the UI's browser tests will skip"; exit 0; fi; \
	echo "==> chromium for the admin UI's browser tests (apt-get; about half a minute)"; \
	$$sudo apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null

# The tests run in TEST_WORKERS processes (pytest-xdist; tests/parallel.py groups the tests that
# share a slow session fixture), then SERIAL_TESTS in one process of their own: the local
# runtime's tests share one running runtime in file order and time out on a busy machine, and
# the least-privilege check also checks the AWS calls every other test's handlers made, which
# each worker leaves in HANDLER_CALLS (tests/iam_calls.py).
TEST_WORKERS ?= auto
SERIAL_TESTS := tests/infrastructure/test_least_privilege.py tests/integration/test_local_runtime.py \
	tests/integration/test_first_ten_minutes.py
HANDLER_CALLS := $(CURDIR)/build/handler-calls

.PHONY: test
test: deps chromium lint ## Lint, run every test, synth and cfn-lint
	rm -rf $(HANDLER_CALLS) && mkdir -p $(HANDLER_CALLS)
	SUNDIAL_HANDLER_CALLS=$(HANDLER_CALLS) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup \
		$(addprefix --ignore=,$(SERIAL_TESTS))
	SUNDIAL_HANDLER_CALLS=$(HANDLER_CALLS) $(PY) -m pytest $(SERIAL_TESTS)
	$(MAKE) --no-print-directory cfn-lint

.PHONY: chaos
# Jobs submitted; under the injected faults about 96% are accepted, so 10500 gives 10,000 or more.
CHAOS_JOBS ?= 11000
CHAOS_SEED ?= 1
chaos: $(VENV)/.installed ## Simulate CHAOS_JOBS jobs (default 11000) with random faults; non-zero on any violation
	$(PY) -m tests.simulation --chaos --jobs $(CHAOS_JOBS) --seed $(CHAOS_SEED)

# The ports are checked before the (slow) synth: a busy one fails at once, naming its variable.
.PHONY: run
run: deps ## Run Sundial locally on the embedded AWS emulator (Ctrl-C stops it)
	@$(PY) -m sundial.local --check-ports
	@echo "==> cdk synth (offline, with cdk-nag)"
	$(CDK) synth --quiet
	$(PY) -m sundial.local

.PHONY: backfill-index
backfill-index: $(VENV)/.installed ## Once after upgrading: index older schedules and DAGs for the listings (a Scan of TABLE)
	@test -n "$(TABLE)" || { echo "usage: make backfill-index TABLE=<the job table>"; exit 2; }
	$(PY) -m sundial.backfill --table $(TABLE)

.PHONY: demo
demo: $(VENV)/.installed ## Submit a realistic mix of jobs to the running `make run`
	$(PY) scripts/demo.py

.PHONY: report
report: $(VENV)/.installed ## Job history report with local Spark: from the running `make run`, else synthetic
	$(PY) scripts/report.py

# make bench: the full suite (about 15 minutes, 5 of them the real-time precision run), writing
# BENCHMARKS.md and bench/results/. BENCH_QUICK=1 runs a short profile into build/bench-quick/.
BENCH_PROFILE := $(if $(BENCH_QUICK),quick,full)

.PHONY: bench
bench: synth ## Run the benchmark suite: BENCHMARKS.md and plots in bench/results/ (BENCH_QUICK=1: short)
	$(PY) -m bench --profile $(BENCH_PROFILE) --command "make bench$(if $(BENCH_QUICK), BENCH_QUICK=1,)"

.PHONY: bench-smoke
bench-smoke: synth ## The benchmark suite at toy sizes, into build/bench-smoke/ (keeps the code working)
	$(PY) -m bench --profile smoke --command "make bench-smoke"

.PHONY: ui-screenshots
ui-screenshots: $(VENV)/.installed chromium ## Re-take the admin UI's screenshots (docs/screenshots/*.png)
	SUNDIAL_UI_SCREENSHOTS=docs/screenshots $(PY) -m pytest -q -p no:cacheprovider tests/ui

.PHONY: lock
lock: $(VENV)/.installed ## Re-resolve requirements.lock and requirements-lambda.lock from pyproject.toml
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 -o requirements.lock -q --no-header
	$(VENV)/bin/uv pip compile pyproject.toml --python-version $(LAMBDA_PYTHON_VERSION) \
		--python-platform aarch64-manylinux_2_28 -o requirements-lambda.lock -q --no-header

.PHONY: clean
clean: ## Remove build output (keeps the venv and node_modules)
	rm -rf cdk.out build .pytest_cache .mypy_cache .ruff_cache
