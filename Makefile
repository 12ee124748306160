# Two entry points (see README): `make demo` runs the main job, `make test` runs the tests.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: install deps test test-fast demo clean

deps:
	bash scripts/install-deps.sh

install:
	$(PIP) install -q -e '.[test,postgres]'

test: deps install
	$(PYTHON) -m pytest -q -p no:cacheprovider

test-fast: install
	$(PYTHON) -m pytest -q -m 'not slurm and not postgres'

demo: deps install
	bash scripts/demo.sh

clean:
	rm -rf .slurm-lab .pal-demo build *.egg-info
