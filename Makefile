# Two commands on a fresh machine (Python 3.11, a C++ compiler):
#   make demo   set everything up, then train seed 003's TinyNet and a small CNN with AMP on npu:0
#   make test   set everything up, then run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch 2.13 (PyPI's default torch wheel is a multi-GB CUDA build).
WHEELS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
TORCH_CPU_INDEX := $(if $(wildcard /opt/wheels),,--extra-index-url https://download.pytorch.org/whl/cpu)

.PHONY: setup build demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.deps: $(BIN)/python
	$(BIN)/pip install $(WHEELS) $(TORCH_CPU_INDEX) "torch==2.13.0" ninja numpy pytest pytest-timeout expecttest
	touch $@

$(VENV)/.installed: $(VENV)/.deps pyproject.toml setup.py
	$(BIN)/pip install --no-build-isolation --no-deps -e .
	touch $@

# Incremental rebuild of the C++ core (ninja): a no-op when nothing changed.
build: $(VENV)/.installed
	$(BIN)/python setup.py -q build_ext --inplace

setup: build

demo: setup
	$(BIN)/vnpu demo

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/bench_overhead.py

clean:
	rm -rf build $(VENV) torch_npu/*.so *.egg-info
