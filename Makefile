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

# Where the cached Debian roots for test-debian13 live (never inside the work tree).
PAL_ROOTS ?= /var/tmp/pal-roots
export PAL_ROOTS

.PHONY: deps venv test test-labs-together test-alone test-host test-host-unit test-host-lab test-debian13 test-debian13-release test-debian13-prepare test-fast lint demo clean distclean

deps:
	bash scripts/install-deps.sh

venv: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	@test -x $(PYTHON) || $(HOST_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install -q --disable-pip-version-check -e '.[test,postgres]'
	@touch $@

# Both Slurm releases: this host's (Debian 12: Slurm 22.05, PostgreSQL 15, Python 3.11) and
# Debian 13's (Slurm 24.11, PostgreSQL 17, Python 3.13) in a cached root. Three steps, each
# pairing work that waits with work that computes, on a 2-core machine:
#   1. lint and the host's unit tests, while the root is built (debootstrap, its packages,
#      wheels, its venv: minutes on a fresh machine, seconds once cached);
#   2. the host's lab and PostgreSQL tests beside the root's: the labs mostly wait on Slurm
#      (a lab test keeps about a fifth of one core busy), so the two releases' labs and the
#      root's unit tests share the machine. In the root, the tests marked `each_release` (what
#      differs between releases: the adapter, pald on Slurm, site compatibility, faults,
#      replay, ...);
#   3. the tests marked `alone`, with nothing beside them: they measure pald's own answers
#      under load (storms, answer latency), and a second lab would be part of that load.
# A failure ends the run at the end of its step (once the root's build is done, so its cache
# is never left half made). The host's output comes first in step 2, the root's after it.
UNIT := not slurm and not postgres
LAB := slurm or postgres
RELEASE := each_release or (postgres and not slurm)
test: deps venv
	@prep_log=$$(mktemp); \
	$(MAKE) --no-print-directory test-debian13-prepare >"$$prep_log" 2>&1 & prep=$$!; \
	rc=0; $(MAKE) --no-print-directory lint test-host-unit || rc=$$?; \
	prep_rc=0; wait $$prep || prep_rc=$$?; cat "$$prep_log"; rm -f "$$prep_log"; \
	[ $$rc = 0 ] || exit $$rc; \
	[ $$prep_rc = 0 ] || echo "test: preparing the Debian 13 root failed (exit $$prep_rc); test-debian13 tries again"; \
	$(MAKE) --no-print-directory test-labs-together && $(MAKE) --no-print-directory test-alone

# Step 2 of `make test`: the host's lab tests (all but `alone`) beside the root's release step.
test-labs-together: deps venv
	@root_log=$$(mktemp); \
	$(MAKE) --no-print-directory test-debian13-release RELEASE_SELECT='($(RELEASE)) and not alone' \
	  >"$$root_log" 2>&1 & root=$$!; \
	rc=0; $(PYTHON) -m pytest -q -p no:cacheprovider -m '($(LAB)) and not alone' --durations=15 || rc=$$?; \
	root_rc=0; wait $$root || root_rc=$$?; cat "$$root_log"; rm -f "$$root_log"; \
	echo "test-labs-together: host exit $$rc, Debian 13 root exit $$root_rc"; \
	[ $$rc = 0 ] && [ $$root_rc = 0 ]

# Step 3 of `make test`: the `alone` tests, the host's then the root's (where any is each_release;
# pytest's exit 5, "none selected", is no failure there).
test-alone: deps venv
	$(PYTHON) -m pytest -q -p no:cacheprovider -m '($(LAB)) and alone' --durations=15
	@if grep -qs '^VERSION_CODENAME=trixie' /etc/os-release; then :; else \
	  rc=0; PAL_HOST_PYTHON=$(PYTHON) bash scripts/test-in-debian-root.sh trixie -m '($(RELEASE)) and alone' || rc=$$?; \
	  [ $$rc = 0 ] || [ $$rc = 5 ]; fi

test-host: deps venv lint
	$(PYTHON) -m pytest -q -p no:cacheprovider

test-host-unit: venv
	$(PYTHON) -m pytest -q -p no:cacheprovider -m '$(UNIT)'

test-host-lab: deps venv
	$(PYTHON) -m pytest -q -p no:cacheprovider -m '$(LAB)' --durations=15

lint: venv
	$(VENV_BIN)/ruff check .
	$(VENV_BIN)/mypy

# The root's part of `make test` (step 2 above): the lab tests of each release beside the root's
# unit tests. RELEASE_SELECT: which lab tests (default: every `each_release` one).
RELEASE_SELECT ?= $(RELEASE)
test-debian13-release: venv
	@if grep -qs '^VERSION_CODENAME=trixie' /etc/os-release; then \
	  echo "test-debian13-release: this host is Debian 13: covered by the host's lab tests"; \
	else PAL_HOST_PYTHON=$(PYTHON) bash scripts/test-in-debian-root.sh trixie -m '$(RELEASE_SELECT)' --durations=15 \
	  --beside -m '$(UNIT)'; fi

# The whole suite again inside a Debian 13 root on this host (scripts/test-in-debian-root.sh:
# built once with debootstrap, ~4 min; later runs reuse it): Slurm 24.11, PostgreSQL 17,
# Python 3.13, LuaSocket 3.1. Needs root. Skipped where the host already is Debian 13
# (test-host covered it), e.g. when `make test` itself runs inside such a root.
# DEBIAN13_ARGS: pytest arguments for a part of it (default: everything).
DEBIAN13_ARGS ?=
test-debian13: venv
	@if grep -qs '^VERSION_CODENAME=trixie' /etc/os-release; then \
	  echo "test-debian13: this host is Debian 13: covered by test-host"; \
	else PAL_HOST_PYTHON=$(PYTHON) bash scripts/test-in-debian-root.sh trixie $(DEBIAN13_ARGS); fi

# Only the root's build (steps 1-3 of scripts/test-in-debian-root.sh and its venv), no tests.
test-debian13-prepare: venv
	@if ! grep -qs '^VERSION_CODENAME=trixie' /etc/os-release; then \
	  PAL_HOST_PYTHON=$(PYTHON) bash scripts/test-in-debian-root.sh --prepare trixie; fi

test-fast: venv
	$(PYTHON) -m pytest -q -p no:cacheprovider -m 'not slurm and not postgres'

demo: deps venv
	bash scripts/demo.sh

clean:
	rm -rf .slurm-lab .pal-demo build *.egg-info

distclean: clean
	rm -rf $(VENV)
