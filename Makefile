# Every target sets up what it needs itself, so a fresh clone needs only these commands.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# harness/ and bench/ are not packaged: they import from the checkout.
export PYTHONPATH := $(CURDIR)

.PHONY: test lint module-sizes demo plan-example bench bench-compare bench-modes bench-quality bench-routing bench-scale bench-webhook soak prometheus binaries cluster-up cluster-down clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# Debian's Prometheus server, for the integration tests that query a real one.
# Two real PromQL engines for the integration tests: Prometheus and VictoriaMetrics.
prometheus:
	@command -v prometheus >/dev/null && command -v victoria-metrics >/dev/null || { \
	  echo "installing Debian's prometheus and victoria-metrics for the integration tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    prometheus victoria-metrics >/dev/null; }

# The real control plane (kube-apiserver, controller-manager, scheduler, etcd, kwok), built from
# the Go modules under tools/ into a cache outside the checkout; minutes the first time only.
binaries:
	@bash tools/build-test-binaries.sh >/dev/null

CLUSTER_DIR ?= .cluster
SCENARIO ?= examples/scenarios/chatty-pair.yaml

cluster-up: $(STAMP) prometheus binaries
	$(BIN)/python -m harness.cluster up --workdir $(CLUSTER_DIR) --scenario $(SCENARIO)

cluster-down: $(STAMP)
	$(BIN)/python -m harness.cluster down --workdir $(CLUSTER_DIR)

# A module past this many lines almost always holds more than one job: split it along them.
MAX_MODULE_LINES := 400

lint: $(STAMP) module-sizes
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

module-sizes:
	@over=$$(find rebalancer -name '*.py' -exec wc -l {} + \
	  | awk '$$2 != "total" && $$1 > $(MAX_MODULE_LINES) {print "  " $$2 ": " $$1 " lines"}'); \
	if [ -n "$$over" ]; then \
	  echo "modules over $(MAX_MODULE_LINES) lines (split each along its jobs):"; echo "$$over"; exit 1; \
	fi

test: $(STAMP) prometheus binaries lint
	$(BIN)/pytest

# Figures, not pass/fail: how heavy the local control plane is.
bench: $(STAMP) binaries
	$(BIN)/python bench/control_plane.py

# Plan quality against the optimum (HiGHS) on the scenario suite; writes bench/results/quality.*
# The optima and bounds are reused from bench/results/yardsticks.json where what they depend on
# is unchanged, so a rerun after a planner change takes minutes.
bench-quality: $(STAMP)
	$(BIN)/python bench/quality.py

# What is quick of every benchmark beside its committed figures, regressions marked: quality
# (cached optima only), one cycle at 1k and 10k nodes, webhook latency. Writes nothing.
bench-compare: $(STAMP)
	$(BIN)/python bench/compare.py

# Routing against moving on the scenario suite: moves only, routing only, both, and the routing
# prediction against the simulator; writes bench/results/routing.{md,json}.
bench-routing: $(STAMP)
	$(BIN)/python bench/routing.py

# One cycle at 1k, 5k and 10k nodes, stage by stage, against the fastest parsing floor;
# writes bench/results/scale.{md,json,png}.
bench-scale: $(STAMP)
	$(BIN)/python bench/scale.py

# The webhook under load on loopback: latency with 200 silent connections open, RSS under a
# 3 MiB review, the answer when the API server hangs; writes bench/results/webhook.{md,json}.
bench-webhook: $(STAMP)
	$(BIN)/python bench/webhook.py

# Evict against migrate on the live control plane; writes bench/results/modes.{md,json}.
bench-modes: $(STAMP) prometheus binaries
	$(BIN)/python bench/modes.py

# The controller in migrate mode for SOAK_SECONDS under shifting traffic and random faults, on the
# local control plane: prints the invariants it checked and writes bench/results/soak.{md,json}.
SOAK_SECONDS ?= 600
soak: $(STAMP) prometheus binaries
	$(BIN)/python -m harness.soak --seconds $(SOAK_SECONDS) --output bench/results/soak

# The rebalancer live on the local control plane: one dry-run cycle, then migrate.
demo: $(STAMP) prometheus binaries
	$(BIN)/python -m harness.demo

# The same engine offline, on a saved cluster state and a saved Prometheus answer.
plan-example: $(STAMP)
	$(BIN)/rebalancer plan --policy examples/demo/policy.yaml \
	  --snapshot examples/demo/snapshot.json --traffic examples/demo/traffic.json

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
