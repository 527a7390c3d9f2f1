# xbench: `make lab` opens the workbench, `make test` runs every test. Both install what they need.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.xbench-installed
export XBENCH_CACHE_DIR ?= $(CURDIR)/.venv/xbench-cache

.PHONY: install demo lab test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[lab,test,peers]"
	touch $@

demo: install
	$(PY) -m xbench demo

lab: install
	$(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks

test: install
	$(PY) -m pytest -q tests

lint: install
	$(VENV)/bin/ruff check xbench kernels tests benchmarks

bench: install
	$(PY) benchmarks/cpu_ops.py

clean:
	rm -rf $(VENV) build dist *.egg-info
