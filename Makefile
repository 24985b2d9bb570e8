# Set-up and the everyday commands. Everything runs in a virtual environment (.venv) that `make install` makes.
VENV ?= .venv
PY := $(VENV)/bin/python
AOT := $(VENV)/bin/aot
STAMP := $(VENV)/.installed

.PHONY: install run test test-all lint typecheck check clean

$(STAMP): pyproject.toml requirements-ci.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -r requirements-ci.txt
	$(PY) -m pip install -q -e '.[dev,bpe,gpt2,hf,mamba,icl]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv with the pinned CPU torch and the package (editable)

run: $(STAMP)  ## the main job: fetch Shakespeare once, train the cpu-quick AoT LM (~5 min), write runs/lm
	$(AOT) train lm --out runs/lm

test: $(STAMP) lint typecheck  ## lint, type-check and run the default test suite (slow tests excluded)
	$(PY) -m pytest

test-all: $(STAMP)  ## every test, the slow ones too
	$(PY) -m pytest -m ''

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks
	$(VENV)/bin/ruff format --check src tests examples benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
