# The two set-up commands of the README: `make demo` and `make test`.
# Each creates .venv (Python 3.11+) with what it needs, then runs.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint bench clean

demo: $(VENV)/.installed
	$(BIN)/vllm-console demo

test: $(VENV)/.installed-test
	@scripts/ensure-test-tools.sh
	$(BIN)/pytest -q -p no:cacheprovider

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

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
