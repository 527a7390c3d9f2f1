# xbench: `make lab` opens the workbench, `make test` runs every test. Both install what they need.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.xbench-installed
export XBENCH_CACHE_DIR ?= $(CURDIR)/.venv/xbench-cache

# The JupyterLab extension (extension/, the xbench-lab package): built with node and installed into the
# venv; rebuilt only when one of its sources changes.
EXT_STAMP   := $(VENV)/.xbench-lab-installed
EXT_SOURCES := $(wildcard extension/package.json extension/yarn.lock extension/.yarnrc.yml \
                 extension/pyproject.toml extension/install.json extension/tsconfig.json \
                 extension/src/*.ts extension/src/*.tsx extension/style/*.css extension/style/*.js \
                 extension/style/icons/*.svg extension/xbench_lab/*.py)
SUDO        := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: install demo lab test lint bench clean chromium clean-extension notebooks

install: $(STAMP) $(EXT_STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[lab,test,peers,models]"
	touch $@

$(EXT_STAMP): $(EXT_SOURCES) | $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pip install --quiet ./extension
	$(VENV)/bin/jupyter labextension list 2>&1 | grep -q "@xbench/lab.*enabled.*OK"
	touch $@

# The browser test drives Debian's chromium (never a browser downloaded by playwright).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium for the browser test"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

clean-extension:
	rm -rf extension/node_modules extension/lib extension/tsconfig.tsbuildinfo \
	  extension/xbench_lab/labextension extension/xbench_lab/_version.py $(EXT_STAMP)

demo: install
	$(PY) -m xbench demo

lab: install
	$(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks

# The tutorials are stored with their outputs and re-executed by nbval, which compares what they print now
# with what they printed when saved (times, addresses and machine facts masked by notebooks/nbval-sanitize.cfg).
# After a change to generated code, refresh them with `make notebooks`.
NBVAL     := --nbval --nbval-current-env --nbval-cell-timeout=300 --nbval-sanitize-with notebooks/nbval-sanitize.cfg
TUTORIALS := notebooks/01-quickstart.ipynb notebooks/02-profiling-and-roofline.ipynb notebooks/03-training.ipynb \
             notebooks/04-autotuning.ipynb notebooks/05-porting-a-pytorch-model.ipynb notebooks/06-migrating-cuda-code.ipynb \
             notebooks/07-benchmark-suite.ipynb \
             notebooks/08-distributed.ipynb

# Test files run side by side on every core (one file stays in one process, so its fixtures compile once);
# OpenMP threads sleep rather than spin at barriers while the other processes hold the cores.
XDIST := -n auto --dist loadfile
test: export OMP_WAIT_POLICY := PASSIVE
test: install chromium
	$(PY) -m pytest -q $(XDIST) tests
	$(PY) -m pytest -q $(XDIST) -p no:cacheprovider $(NBVAL) $(TUTORIALS)

notebooks: install
	$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace $(TUTORIALS)

lint: install
	$(VENV)/bin/ruff check xbench kernels tests benchmarks

bench: install
	$(PY) benchmarks/cpu_ops.py

clean:
	rm -rf $(VENV) build dist *.egg-info
