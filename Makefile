# Two commands on a fresh machine (Python 3.11, a C++ compiler):
#   make demo   set up the minimum (runtime dependencies, one build), then train seed 003's TinyNet
#               and a small CNN with AMP on npu:0
#   make test   set up everything (the test dependencies too), lint, then run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch 2.13 (PyPI's default torch wheel is a multi-GB CUDA build).
WHEELS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
TORCH_CPU_INDEX := $(if $(wildcard /opt/wheels),,--extra-index-url https://download.pytorch.org/whl/cpu)
PIP := $(BIN)/pip install $(WHEELS) $(TORCH_CPU_INDEX)
# Requirements are written once, in pyproject.toml; these print them one per line.
READ_PYPROJECT := $(BIN)/python -c "import tomllib; d = tomllib.load(open('pyproject.toml', 'rb')); print('\n'.join(
RUNTIME_REQUIREMENTS := $(READ_PYPROJECT)d['project']['dependencies'] + d['build-system']['requires']))"
TEST_REQUIREMENTS := $(READ_PYPROJECT)d['project']['optional-dependencies']['test']))"
BENCH_REQUIREMENTS := $(READ_PYPROJECT)d['project']['optional-dependencies']['bench']))"

.PHONY: setup build demo test lint format bench fuzz soak docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Runtime dependencies and the build tools: all the demo needs.
$(VENV)/.deps: $(BIN)/python pyproject.toml
	$(RUNTIME_REQUIREMENTS) > $(VENV)/requirements.txt
	$(PIP) -r $(VENV)/requirements.txt
	touch $@

CSRC := $(shell find torch_npu/csrc -name '*.cpp' -o -name '*.h')

# One build of the C++ core (editable install: entry points for autoload, `vnpu`, `msprof`). ninja keeps
# its objects in build/temp, so after a C++ change only the changed files are compiled again.
$(VENV)/.built: $(VENV)/.deps setup.py $(CSRC)
	$(BIN)/pip install --no-build-isolation --no-deps -e .
	touch $@

# The test dependencies (pyproject's [test] extra), installed in CANN's environment as `vnpu env`
# gives it: DeepSpeed's build reads ASCEND_HOME_PATH once it sees torch_npu.
$(VENV)/.test-deps: $(VENV)/.built pyproject.toml
	$(TEST_REQUIREMENTS) > $(VENV)/test-requirements.txt
	eval "$$($(BIN)/vnpu env)" && $(PIP) --no-build-isolation -r $(VENV)/test-requirements.txt
	$(DEEPSPEED_CPU_OPS)
	touch $@

# DeepSpeed's CPU accelerator (the tests' CPU reference for DeepSpeed on npu) compiles its shared-memory allreduce
# op the first time it starts (about a minute of CPU). It is a test dependency's native part: built here, into the
# directory tests/conftest.py points torch's extension builds at, as `DS_BUILD_SHM_COMM` would at DeepSpeed's install.
# The environment's scripts come first on PATH, as for the programs tests start: the same ninja must find the build
# up to date (another ninja's log makes it build again).
DEEPSPEED_CPU_OPS := PATH=$(abspath $(BIN)):$$PATH DS_ACCELERATOR=cpu TORCH_EXTENSIONS_DIR=$(abspath $(VENV))/torch_extensions \
	$(BIN)/python -c \
	"from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder; ShareMemCommBuilder().load(verbose=False)"

build: $(VENV)/.built

setup: $(VENV)/.test-deps

demo: build
	$(BIN)/vnpu demo

# ruff (lint + format check) for Python, clang-format for the C++ core.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/clang-format --dry-run --Werror $(CSRC)

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
	$(BIN)/clang-format -i $(CSRC)

# One pytest-xdist worker more than cores: workers spend part of their time waiting for the programs their
# tests start (ranks, launchers, timeouts), and the extra one keeps every core busy meanwhile. Work stealing: a
# worker that runs out takes tests queued on another, so no worker finishes a long queue alone.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

test: setup lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# Every benchmark, then the summary (results/summary.json and .svg, the READMEs' benchmark tables).
bench: build
	$(BENCH_REQUIREMENTS) > $(VENV)/bench-requirements.txt
	$(PIP) -r $(VENV)/bench-requirements.txt
	$(BIN)/python bench/run_all.py

# The operator tables of README.md / README.zh.md, from the operator registry.
docs: build
	$(BIN)/python docs/operator_tables.py

# Differential fuzzing beyond CI's slice: `make fuzz MINUTES=30` (seeds other than CI's).
MINUTES ?= 10
fuzz: build
	$(BIN)/vnpu fuzz --seed 1000000 --programs 100000000 --minutes $(MINUTES)

# AMP training soak with npu memory and RSS reported: `make soak STEPS=3000`.
STEPS ?= 3000
soak: build
	$(BIN)/python tests/soak/amp_training_soak.py --steps $(STEPS)

clean:
	rm -rf build $(VENV) torch_npu/*.so *.egg-info
