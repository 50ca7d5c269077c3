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
	$(BIN)/pip install $(WHEELS) $(TORCH_CPU_INDEX) "torch==2.13.0" "torchvision==0.28.0" "transformers==5.24.0" ninja numpy pyyaml rich libcst pytest pytest-timeout pytest-xdist expecttest
	touch $@

CSRC := $(shell find torch_npu/csrc -name '*.cpp' -o -name '*.h')

# pip builds the C++ core once (editable install, entry points for autoload and `vnpu`).
$(VENV)/.installed: $(VENV)/.deps pyproject.toml setup.py
	$(BIN)/pip install --no-build-isolation --no-deps -e .
	touch $@
	touch $(VENV)/.built

# After C++ changes: incremental rebuild in ./build with ninja.
$(VENV)/.built: $(VENV)/.installed $(CSRC)
	$(BIN)/python setup.py -q build_ext --inplace
	touch $@

build: $(VENV)/.built

setup: build

demo: setup
	$(BIN)/vnpu demo

test: setup
	$(BIN)/python -m pytest -q -n auto

bench: setup
	$(BIN)/python bench/bench_overhead.py
	$(BIN)/python bench/bench_graphs.py
	$(BIN)/python bench/bench_fusion_attention.py
	$(BIN)/python bench/bench_fallback_check.py
	$(BIN)/python bench/bench_migrate.py
	$(BIN)/python bench/bench_distributed.py
	$(BIN)/python bench/bench_profiler.py

clean:
	rm -rf build $(VENV) torch_npu/*.so *.egg-info
