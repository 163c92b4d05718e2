# Two commands do all set-up on a fresh machine: `make demo` runs the main job, `make test` runs every test.
# Both create .venv when missing and install the CPU torch wheel before anything that depends on torch.
# Elsewhere, point pip at the CPU wheels: make test TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
EXTRAS ?= cpu,dev
# pytest workers (pytest-xdist; a test file stays on one worker); 0: one process. One math thread each, so 2 workers fill 2 cores.
PYTEST_WORKERS ?= 2

.PHONY: demo test nbtest pytest sync sync-check bench docs clean system-deps test-xla test-floor
.DEFAULT_GOAL := test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# System packages the tests need (WordNet, headless Chromium), declared once in scripts/system-packages.txt: installed
# with apt-get when root, otherwise one line names them and the command, before anything else is installed.
system-deps:
	bash scripts/system_deps.sh

# pip keeps no cache (--no-cache-dir): a wheel cache would double the disk each environment takes.
PIP_INSTALL := -m pip install -q --no-cache-dir
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	bash scripts/need_disk.sh 3 $(VENV) "the kit's environment ($(VENV))"
	$(BIN)/python $(PIP_INSTALL) --upgrade pip "setuptools>=77"
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python $(PIP_INSTALL) $(TORCH_SPEC) $(TORCH_PIP_ARGS)
	$(BIN)/python $(PIP_INSTALL) -e ".[$(EXTRAS)]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/letter8 demo

# Every notebook runs once in `make test`: tests/test_docs.py builds the docs site, which executes each notebook as
# nbdev-test does (and fails on any cell that raises), then opens every page in Chromium. `make nbtest` is the quick
# loop while editing notebooks.
test: system-deps $(VENV)/.installed sync-check pytest

# After editing notebooks: export the library, clean the notebooks, refresh the packaged segment notebook and README.md.
sync: $(VENV)/.installed
	$(BIN)/nbdev-export && $(BIN)/nbdev-clean
	cp nbs/segment.ipynb letter8_tokenizer/segment.ipynb
	$(BIN)/python scripts/make_readme.py

sync-check: $(VENV)/.installed
	PATH="$(abspath $(BIN)):$$PATH" bash .ci/sync_check.sh

nbtest: system-deps $(VENV)/.installed
	$(BIN)/nbdev-test --n-workers 2

pytest: $(VENV)/.installed
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist loadfile --ignore=tests/xla tests

bench: $(VENV)/.installed
	$(BIN)/python bench/kmeans/constrained.py
	$(BIN)/python bench/tokenizer/model.py
	$(BIN)/python bench/checkpoint/save.py
	$(BIN)/python bench/checkpoint/deadline.py

# The docs site as static HTML in _docs/ (quarto builds the published site in the GitHub workflow).
docs: system-deps $(VENV)/.installed
	$(BIN)/python scripts/build_docs.py

clean:
	rm -rf _proc _docs .pytest_cache

# Kaggle's versions, in their own environment: Kaggle's TPU image ships torch 2.8.0 + torch_xla 2.8.0, the oldest torch the kit
# declares (pyproject's floor). `make test-xla` runs tests/xla there on XLA's CPU backend, which stands in for a TPU
# (CPU_NUM_DEVICES gives the SPMD tests several devices); `make test-floor` runs the main suite there, on torch 2.8.
# PyPI's torch 2.8.0 is the CUDA build: with its nvidia-* wheels the environment takes about 8 GiB, checked before pip.
XLA_VENV ?= .venv-xla
XLA_SPEC ?= torch==2.8.0 torch-xla==2.8.0
$(XLA_VENV)/.installed: pyproject.toml
	bash scripts/need_disk.sh 10 $(XLA_VENV) "Kaggle's torch 2.8 + torch-xla environment ($(XLA_VENV))"
	test -x $(XLA_VENV)/bin/python || $(PYTHON) -m venv $(XLA_VENV)
	$(XLA_VENV)/bin/python $(PIP_INSTALL) --upgrade pip "setuptools>=77"
	$(XLA_VENV)/bin/python $(PIP_INSTALL) $(XLA_SPEC)
	$(XLA_VENV)/bin/python $(PIP_INSTALL) -e ".[$(EXTRAS)]" $(XLA_SPEC)
	touch $@

test-xla: $(XLA_VENV)/.installed
	PJRT_DEVICE=CPU CPU_NUM_DEVICES=4 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(XLA_VENV)/bin/python -m pytest -q -rs -p no:cacheprovider tests/xla

test-floor: system-deps $(XLA_VENV)/.installed
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(XLA_VENV)/bin/python -m pytest -q -rs -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile \
		--ignore=tests/xla tests
