# Commands for a machine that has python3 (with its venv module) and make:
#   make book   -- set everything up, build the data and the book (open _build/html/index.html)
#   make test   -- set everything up and run the whole test suite, notebooks included
#   make lab    -- also install JupyterLab and open the chapters with a live kernel
# On Linux x86_64, PyPI's torch is the CUDA build (several GB); for the CPU build:
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_INDEX ?=

.PHONY: setup data book test lab clean

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
	$(BIN)/python -m pytest

lab: data
	$(BIN)/python -m pip install --progress-bar off -r requirements-lab.txt
	$(BIN)/jupyter lab book/

clean:
	rm -rf _build $(VENV) data/cache data/brown_cipher.txt data/splits.json
