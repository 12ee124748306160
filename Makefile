# Two entry points (see README): `make demo` runs the main job, `make test` runs the tests.
#
# The project brings its own virtual environment (.venv): Debian's Python is externally managed
# (PEP 668) and refuses system-wide pip installs. The venv is made from Debian's python3
# (/usr/bin/python3 + python3-venv, installed by `make deps`) whatever python3 comes first on
# PATH, and reused by every later run; it is reinstalled only when setup.cfg or pyproject.toml
# change. palctl, pald and pytest all run from it (its bin/ comes first on PATH).
HOST_PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
VENV ?= .venv
VENV_BIN := $(abspath $(VENV))/bin
PYTHON := $(VENV_BIN)/python
STAMP := $(VENV)/.installed
export PATH := $(VENV_BIN):$(PATH)

.PHONY: deps venv test test-fast lint demo clean distclean

deps:
	bash scripts/install-deps.sh

venv: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	@test -x $(PYTHON) || $(HOST_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install -q --disable-pip-version-check -e '.[test,postgres]'
	@touch $@

test: deps venv lint
	$(PYTHON) -m pytest -q -p no:cacheprovider

lint: venv
	$(VENV_BIN)/ruff check .
	$(VENV_BIN)/mypy

test-fast: venv
	$(PYTHON) -m pytest -q -p no:cacheprovider -m 'not slurm and not postgres'

demo: deps venv
	bash scripts/demo.sh

clean:
	rm -rf .slurm-lab .pal-demo build *.egg-info

distclean: clean
	rm -rf $(VENV)
