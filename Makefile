# Two commands for a fresh machine that has only python3:
#   make book   -- set everything up, build the data and the book (open _build/html/index.html)
#   make test   -- set everything up and run the whole test suite, notebooks included
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup data book test clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $(STAMP)

data: setup
	$(BIN)/python -m cipherlab data verify

book: data
	$(BIN)/jupyter-book build . -W --keep-going
	@echo "The book is at $(CURDIR)/_build/html/index.html"

test: data
	$(BIN)/python -m pytest

clean:
	rm -rf _build $(VENV) data/cache data/brown_cipher.txt data/splits.json
