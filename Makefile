# Every target sets up what it needs itself, so a fresh clone needs only these commands.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint unit demo prometheus clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# Debian's Prometheus server, for the integration tests that query a real one.
prometheus:
	@command -v prometheus >/dev/null || { \
	  echo "installing Debian's prometheus for the integration tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: $(STAMP) prometheus lint
	$(BIN)/pytest

demo: $(STAMP)
	$(BIN)/rebalancer plan --policy examples/demo/policy.yaml \
	  --snapshot examples/demo/snapshot.json --traffic examples/demo/traffic.json

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
