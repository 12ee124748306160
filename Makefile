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

# Where the cached Debian roots live (never inside the work tree).
PAL_ROOTS ?= /var/tmp/pal-roots
export PAL_ROOTS
# The Debian suites whose Slurm is tested in a cached root beside the host's (scripts/
# test-in-debian-root.sh): trixie (Debian 13: Slurm 24.11, PostgreSQL 17, Python 3.13) and
# forky (Debian testing: Slurm 26.05, PostgreSQL 18, Python 3.14), and slurm-25.11 (Debian 13
# with SchedMD's Slurm 25.11 built from third_party/ over Debian's: scripts/build-slurm.sh;
# slurm-25.05 is built the same way, by `make test-root SUITE=slurm-25.05` only). The suite the
# host itself runs is left out: the host's own tests cover it.
ROOT_SUITES ?= trixie forky slurm-25.11
HOST_SUITE := $(shell sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null)
ROOTS := $(filter-out $(HOST_SUITE),$(ROOT_SUITES))

.PHONY: deps venv test test-labs-together test-alone test-host test-host-unit test-host-lab test-roots-release test-roots-prepare test-root test-debian13 test-fast lint demo clean distclean

deps:
	bash scripts/install-deps.sh

venv: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	@test -x $(PYTHON) || $(HOST_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install -q --disable-pip-version-check -e '.[test,postgres]'
	@touch $@

# Every tested Slurm release: this host's (Debian 12: Slurm 22.05, PostgreSQL 15, Python 3.11)
# and each of ROOTS in a cached root. Three steps, each pairing work that waits with work that
# computes, on a 2-core machine:
#   1. lint and the host's unit tests, while the roots are built (debootstrap, their packages,
#      wheels, their venvs: minutes on a fresh machine, seconds once cached);
#   2. the host's lab and PostgreSQL tests beside the roots': the labs mostly wait on Slurm
#      (a lab test keeps about a fifth of one core busy), so the releases' labs and the roots'
#      unit tests share the machine. In each root, the tests marked `each_release` (what
#      differs between releases: the adapter, pald on Slurm, site compatibility, faults,
#      replay, ...);
#   3. the tests marked `alone`, with nothing beside them: they measure pald's own answers
#      under load (storms, answer latency), and a second lab would be part of that load.
# A failure ends the run at the end of its step (once the roots' builds are done, so no cache
# is left half made). The host's output comes first in step 2, each root's after it.
UNIT := not slurm and not postgres
LAB := slurm or postgres
RELEASE := each_release or (postgres and not slurm)
test: deps venv
	@prep_log=$$(mktemp); \
	$(MAKE) --no-print-directory test-roots-prepare >"$$prep_log" 2>&1 & prep=$$!; \
	rc=0; $(MAKE) --no-print-directory lint test-host-unit || rc=$$?; \
	prep_rc=0; wait $$prep || prep_rc=$$?; cat "$$prep_log"; rm -f "$$prep_log"; \
	[ $$rc = 0 ] || exit $$rc; \
	[ $$prep_rc = 0 ] || echo "test: preparing a Debian root failed (exit $$prep_rc); step 2 tries again"; \
	$(MAKE) --no-print-directory test-labs-together && $(MAKE) --no-print-directory test-alone

# Step 2 of `make test`: the host's lab tests (all but `alone`) beside the roots' release step.
# The host's failed tests are named again at the very end (after every root's log, which
# names its own at its end), so the tail of the output tells every failure.
test-labs-together: deps venv
	@root_log=$$(mktemp); host_log=$$(mktemp); host_rc=$$(mktemp); \
	$(MAKE) --no-print-directory test-roots-release RELEASE_SELECT='($(RELEASE)) and not alone' \
	  >"$$root_log" 2>&1 & root=$$!; \
	{ rc=0; $(PYTHON) -m pytest -q -p no:cacheprovider -m '($(LAB)) and not alone' --durations=15 || rc=$$?; \
	  echo $$rc >"$$host_rc"; } 2>&1 | tee "$$host_log"; rc=$$(cat "$$host_rc"); \
	root_rc=0; wait $$root || root_rc=$$?; cat "$$root_log"; \
	grep -E '^(FAILED|ERROR) ' "$$host_log" | sed 's/^/test-labs-together: host: /' || true; \
	rm -f "$$root_log" "$$host_log" "$$host_rc"; \
	echo "test-labs-together: host exit $$rc, Debian roots ($(ROOTS)) exit $$root_rc"; \
	[ $$rc = 0 ] && [ $$root_rc = 0 ]

# Step 3 of `make test`: the `alone` tests, the host's then each root's, one at a time (where
# any is each_release; pytest's exit 5, "none selected", is no failure there).
test-alone: deps venv
	$(PYTHON) -m pytest -q -p no:cacheprovider -m '($(LAB)) and alone' --durations=15
	@for s in $(ROOTS); do \
	  rc=0; PAL_HOST_PYTHON=$(PYTHON) bash scripts/test-in-debian-root.sh $$s -m '($(RELEASE)) and alone' || rc=$$?; \
	  [ $$rc = 0 ] || [ $$rc = 5 ] || exit $$rc; done

test-host: deps venv lint
	$(PYTHON) -m pytest -q -p no:cacheprovider

test-host-unit: venv
	$(PYTHON) -m pytest -q -p no:cacheprovider -m '$(UNIT)'

test-host-lab: deps venv
	$(PYTHON) -m pytest -q -p no:cacheprovider -m '$(LAB)' --durations=15

lint: venv
	$(VENV_BIN)/ruff check .
	$(VENV_BIN)/mypy

# The roots' part of `make test` (step 2 above): in every root at once, its lab tests beside its
# unit tests (each root's Python and PostgreSQL are its own); each root's output after the run,
# in ROOTS' order. RELEASE_SELECT: which lab tests (default: every `each_release` one). A
# slurm-X.Y root runs its lab tests only: its Python and PostgreSQL are trixie's, whose unit
# tests run in the trixie root.
RELEASE_SELECT ?= $(RELEASE)
test-roots-release: venv
	@dir=$$(mktemp -d); \
	for s in $(ROOTS); do \
	  case $$s in slurm-*) set -- ;; *) set -- --beside -m '$(UNIT)' ;; esac; \
	  ( rc=0; PAL_HOST_PYTHON=$(PYTHON) bash scripts/test-in-debian-root.sh $$s -m '$(RELEASE_SELECT)' \
	      --durations=15 "$$@" >"$$dir/$$s.log" 2>&1 || rc=$$?; echo $$rc >"$$dir/$$s.rc" ) & \
	done; wait; \
	rc=0; for s in $(ROOTS); do cat "$$dir/$$s.log"; r=$$(cat "$$dir/$$s.rc"); \
	  echo "test-roots-release: $$s exit $$r"; [ "$$r" = 0 ] || rc=1; done; \
	for s in $(ROOTS); do grep -E '^(FAILED|ERROR) ' "$$dir/$$s.log" | sed "s|^|test-roots-release: $$s: |" || true; done; \
	rm -rf "$$dir"; exit $$rc

# Only the roots' builds (steps 1-3 of scripts/test-in-debian-root.sh and their venvs), one
# after the other, no tests.
test-roots-prepare: venv
	@rc=0; for s in $(ROOTS); do \
	  PAL_HOST_PYTHON=$(PYTHON) bash scripts/test-in-debian-root.sh --prepare $$s || rc=$$?; done; exit $$rc

# The whole suite again inside one root on this host (scripts/test-in-debian-root.sh: built
# once with debootstrap, minutes; later runs reuse it). Needs root. SUITE: a Debian suite
# (trixie: Slurm 24.11, forky: Slurm 26.05) or slurm-25.05/slurm-25.11 (built from source); skipped where the host runs that suite itself
# (test-host covers it), e.g. when `make test` runs inside such a root. ROOT_ARGS: pytest
# arguments for a part of it (default: everything). `make test-debian13`: SUITE=trixie, with
# DEBIAN13_ARGS.
SUITE ?= trixie
ROOT_ARGS ?=
test-root: venv
	@if [ "$(SUITE)" = "$(HOST_SUITE)" ]; then \
	  echo "test-root: this host runs $(SUITE): covered by test-host"; \
	else PAL_HOST_PYTHON=$(PYTHON) bash scripts/test-in-debian-root.sh $(SUITE) $(ROOT_ARGS); fi

DEBIAN13_ARGS ?=
test-debian13:
	@$(MAKE) --no-print-directory test-root SUITE=trixie ROOT_ARGS='$(DEBIAN13_ARGS)'

test-fast: venv
	$(PYTHON) -m pytest -q -p no:cacheprovider -m 'not slurm and not postgres'

demo: deps venv
	bash scripts/demo.sh

clean:
	rm -rf .slurm-lab .pal-demo build *.egg-info

distclean: clean
	rm -rf $(VENV)
