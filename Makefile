# Set-up and the everyday commands. Everything runs in a virtual environment (.venv) that `make install` makes.
VENV ?= .venv
PY := $(VENV)/bin/python
AOT := $(VENV)/bin/aot
STAMP := $(VENV)/.installed
# Where pip gets torch. Empty: pip's own configuration. `make install TORCH_INDEX=https://download.pytorch.org/whl/cpu`
# installs the pinned torch (requirements-ci.txt) as PyTorch's CPU build first, on a machine whose pip would pick CUDA.
TORCH_INDEX ?=
# timm (aot[timm]), installed by `make install` through scripts/install_timm.py; not in requirements-ci.txt: pip
# would bring PyPI's torchvision, a CUDA build that does not import beside the CPU torch
TIMM ?= timm==1.0.31

.PHONY: install install-timm run report results docs test test-all lint typecheck check clean

$(STAMP): pyproject.toml setup.py requirements-ci.txt scripts/install_timm.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(if $(TORCH_INDEX),$(PY) -m pip install -q "$$(grep '^torch==' requirements-ci.txt)" --index-url $(TORCH_INDEX))
	$(PY) -m pip install -q -r requirements-ci.txt
	$(PY) -m pip install -q -e '.[dev,bpe,gpt2,hf,hf-data,eval,lens,mamba,icl,slurm]'
	$(PY) scripts/install_timm.py '$(TIMM)' $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	touch $(STAMP)

install: $(STAMP)  ## create .venv with the pinned CPU torch, the package (editable) and the libraries its adapters meet

# timm needs torchvision: the build made for the installed torch where its index is reachable (0.28.0+cpu for
# 2.13.0+cpu: download.pytorch.org, or TORCH_INDEX), else that release's Python part from PyPI (0.28.0+pyonly: no C++
# ops, which timm does not use); refuses in one line when pip would replace torch. `make install` runs it too.
install-timm: $(STAMP)  ## timm (TIMM=...) beside the installed torch, or one line saying why not (scripts/install_timm.py)
	$(PY) scripts/install_timm.py '$(TIMM)' $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))

run: $(STAMP)  ## the main job: fetch Shakespeare once, train the paper's AoT-MSSA (preset cpu-mssa), write runs/lm (time: benchmarks/main_job)
	$(AOT) train lm --out runs/lm --resume auto

report: $(STAMP)  ## the paper's experiments at the quick size, one report: runs/report/index.html (time: benchmarks/report)
	$(PY) -m pip install -q -e '.[austen]'
	-$(AOT) data fetch austen
	-$(AOT) data fetch fashion-mnist
	$(AOT) reproduce --preset quick --out runs/report

# every folder's render command (scripts/results_index.py FOLDERS), then the index: benchmarks/README.md, docs/results.md
# and the <!-- results:... --> blocks; tests/test_results_index.py fails while a generated file differs from this
results: $(STAMP)  ## rewrite every generated table and block of the README, docs/ and benchmarks/ from the records; trains nothing
	OMP_NUM_THREADS=1 $(PY) scripts/results_index.py --all

docs: $(STAMP)  ## the documentation site (mkdocs.yml) into site/, strict: a broken link or reference fails
	$(VENV)/bin/mkdocs build --strict

test: $(STAMP) lint typecheck  ## lint, type-check and run the default test suite (slow tests excluded)
	$(PY) -m pytest

test-all: $(STAMP)  ## every test, the slow ones too
	$(PY) -m pytest -m ''

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks
	$(VENV)/bin/ruff format --check src tests examples benchmarks
	$(VENV)/bin/lint-imports  # the layers of pyproject.toml [tool.importlinter] (docs/architecture.md)

typecheck: $(STAMP)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
