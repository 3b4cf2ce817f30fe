# Two set-up commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 is what these machines carry; elsewhere `make TORCH=torch` (or any
# spec) takes the platform's ordinary torch. It goes in first so nothing else pulls a CUDA build.
TORCH ?= torch==2.13.0
DEMO_OUT ?= demo-out

.PHONY: install demo test bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/tecb-data build --source blurbs --demo --out $(DEMO_OUT)
	$(VENV)/bin/tecb-data build --source tenkgnad --demo --out $(DEMO_OUT)
	$(VENV)/bin/tecb-data stats $(DEMO_OUT)/blurbs-clustering-s2s
	@echo "demo datasets written to $(DEMO_OUT)/ (one folder per dataset; load one with tecb_data.load('$(DEMO_OUT)/blurbs-clustering-s2s'))"

test: install
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

bench: install
	for b in bench/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache
