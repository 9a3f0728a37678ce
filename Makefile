# Commands for a machine that has python3 (with its venv module) and make:
#   make book   -- set everything up, build the data and the book (open _build/html/index.html)
#   make test   -- set everything up, run the whole test suite (notebooks included), build the book
#                  and open every page in Chromium (tests/test_browser.py; as root, `make test`
#                  installs Debian's chromium when it is missing; otherwise those tests are skipped)
#   make quick  -- the quick loop: ruff check, then the unit tests outside tests/conftest.py's SLOW_MODULES
#                  (no training, no committed models, no book; about two minutes on two cores)
#   make unit   -- the edit-test loop: the unit tests only (no notebooks, no book build, no browser),
#                  then ruff check
#   make lint   -- ruff check (its settings are in pyproject.toml)
#   make lab    -- also install JupyterLab and open the chapters with a live kernel
#   make colab-check -- Colab's Python and packages in a venv of their own (runs/colab-venv; torch is a
#                  CUDA build of several GB), cipherlab installed as the setup cell does, the tests and
#                  chapters run there -> benchmarks/results/colab.json (before a release; not part of make test)
#   make numerics -- every chapter (and the prose's facts) again under a second CPU's float kernels, two
#                  threads, deterministic algorithms and fresh seeds before each cell; lists each cell whose
#                  stored output changes (tools/numerics.py; about 45 minutes on 2 cores; not part of make test)
#   make outputs [NB=book/03_mha.ipynb] -- rewrite the chapters' generated cells, then run each in a
#                  fresh kernel on one thread and store its outputs (CONTRIBUTING.md)
#   make jb2-spike -- the Jupyter Book 2 comparison build (benchmarks/jb2/COMPARISON.md) into _build_jb2/, with
#                  Jupyter Book 2 in its own venv outside the repository (JB2_VENV); not part of make test
# On Linux x86_64, PyPI's torch is the CUDA build (several GB); for the CPU build:
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_INDEX ?=

CHROMIUM ?= /usr/bin/chromium

.PHONY: setup data book test quick unit lint browser browser-test lab outputs numerics clean colab-check jb2-spike

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -m venv --help > /dev/null 2>&1 || { echo "$(PYTHON) has no venv module: on Debian or Ubuntu run 'sudo apt install python3-venv', then make again" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@if [ -n "$(TORCH_INDEX)" ]; then echo "Installing torch from $(TORCH_INDEX) ..."; $(BIN)/python -m pip install --progress-bar off --index-url $(TORCH_INDEX) "$$(grep '^torch==' requirements.txt)"; fi
	@echo "Installing the pinned requirements into $(VENV) (a few minutes on a first install) ..."
	$(BIN)/python -m pip install --progress-bar off -r requirements.txt
	@echo "Installed: $$($(BIN)/python -c 'import torch, cipherlab; print("cipherlab", cipherlab.__version__, "with torch", torch.__version__)')"
	touch $(STAMP)

data: setup
	$(BIN)/python -m cipherlab data verify

book: data
	$(BIN)/jupyter-book build . -W --keep-going
	@echo "The book is at $(CURDIR)/_build/html/index.html"

test: data
	$(BIN)/python -m pytest --ignore=tests/test_browser.py
	$(BIN)/jupyter-book build . -W --keep-going
	@$(MAKE) --no-print-directory browser-test

unit: data
	$(BIN)/python -m pytest tests -q --ignore=tests/test_browser.py -p no:nbval -o addopts="-p no:cacheprovider"
	@$(MAKE) --no-print-directory lint

quick: data
	$(BIN)/ruff check .
	$(BIN)/python -m pytest tests -q -m "not slow" --ignore=tests/test_browser.py -p no:nbval -o addopts="-p no:cacheprovider"

lint: setup
	$(BIN)/ruff check .

colab-check:
	$(PYTHON) benchmarks/colab_check.py --out benchmarks/results/colab.json

# Debian's chromium for the browser tests, when it is missing and we may install it (root with apt).
browser:
	@if [ ! -x "$(CHROMIUM)" ] && [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null; then \
	  echo "Installing Debian's chromium for the browser tests (apt-get install -y chromium) ..."; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null \
	    || echo "apt-get could not install chromium" >&2; \
	fi

# The built book (_build/html) in a real browser; build it first (make book, or make test).
browser-test: setup browser
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  echo "*** SKIPPING the browser tests: no Chromium at $(CHROMIUM). Install it (Debian/Ubuntu:" \
	       "sudo apt-get install chromium) or name one with CHROMIUM=... CIPHERLAB_CHROMIUM=... ***"; \
	fi
	CIPHERLAB_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest tests/test_browser.py -rs

numerics: data
	$(BIN)/python tools/numerics.py

outputs: data
	$(BIN)/python -m cipherbook.viva sync $(NB)
	$(BIN)/python -m cipherbook.viva outputs $(NB)

lab: data
	$(BIN)/python -m pip install --progress-bar off -r requirements-lab.txt
	$(BIN)/jupyter lab book/

# The Jupyter Book 2 spike, rebuilt from benchmarks/jb2/myst.yml (benchmarks/jb2/COMPARISON.md). It needs neither .venv nor the
# data, and the published book stays the Jupyter Book 1 build above.
jb2-spike:
	PYTHON=$(PYTHON) bash benchmarks/jb2/build.sh

clean:
	rm -rf _build $(VENV) data/cache data/brown_cipher.txt data/splits.json
