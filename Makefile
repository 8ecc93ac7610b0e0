# The README's two commands: `make demo` (the main job) and `make test` (the tests).
# Both create or reuse a local virtual environment with pinned dependencies.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.portlayer-installed
BENCH_STAMP := $(VENV)/.portlayer-bench-installed
DEEPSPEED_STAMP := $(VENV)/.portlayer-deepspeed-installed
# The venv is installed by uv, with the same pins: pip took 175 s for it here, uv 67 s (bytecode compiled, as
# pip does). uv reads none of pip's settings, so the folders of local wheels pip's configuration names (where
# this machine keeps the pinned cpu torch) are passed on.
FIND_LINKS := $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
UV_VERSION := $(shell sed -n 's/^uv==//p' constraints.txt)
INSTALL := $(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode \
	$(foreach folder,$(FIND_LINKS),--find-links $(folder)) -c constraints.txt
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1

.PHONY: demo test test-compat test-gpu lint bench venv clean mutation

venv: $(DEEPSPEED_STAMP)

$(STAMP): pyproject.toml setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(INSTALL) -e '.[migrate,train,dev]'
	touch $(STAMP)

# The tests also need the [deepspeed] extra (the trainer's ZeRO strategies). DeepSpeed ships as a source archive
# only, and build isolation would fetch a CUDA torch to build it: build it against the pinned cpu torch
# (wheel present, --no-build-isolation), with no compiled ops (DS_BUILD_OPS=0; ZeRO needs none).
$(DEEPSPEED_STAMP): $(STAMP)
	$(INSTALL) wheel setuptools
	DS_BUILD_OPS=0 $(INSTALL) --no-build-isolation -e '.[deepspeed]'
	touch $(DEEPSPEED_STAMP)

# The benchmarks also need the [bench] extra (accelerate, for HuggingFace's Trainer).
$(BENCH_STAMP): $(STAMP)
	$(INSTALL) -e '.[migrate,train,dev,bench]'
	touch $(BENCH_STAMP)

demo: $(STAMP)
	$(BIN)/portlayer doctor
	$(BIN)/python examples/demo.py

# In random order (pytest-randomly), so that order dependence cannot come back: the seed is printed first
# (-q hides pytest's header), and `make test SEED=N` repeats an order.
test: $(DEEPSPEED_STAMP)
	@seed=$${SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	echo "test order: --randomly-seed=$$seed (make test SEED=$$seed repeats it)"; \
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup -p randomly --randomly-seed=$$seed

# The runtime, drop-in, migrate-output, trainer and parity tests, and a 2-rank parity run of each tiny preset, on
# the oldest torch portlayer declares (the oldest a current torch_npu pins), the releases the vendors pin, and the
# newest, each in a venv of its own (.venv-torch<VERSION>, kept); not part of `make test`. COMPAT_TORCH picks.
COMPAT_TORCH ?= 2.6.0 2.7.1 2.8.0 2.11.0 2.15.0
test-compat: $(STAMP)
	$(BIN)/python tools/compat.py $(COMPAT_TORCH)

# The lane for a lent GPU machine (tools/gpu_lane.py, docs/gpu-lane.md): the machine's own python and torch, no venv
# and no download; portlayer installed without dependencies, with the wheels of what the machine lacks from
# WHEELS (`make test-gpu WHEELS=../wheels`); the suite with CUDA visible, then the CUDA-only checks. Not part
# of `make test`. `make test-gpu GPU_LANE=--dry-run` says what it would run, on a machine without CUDA.
test-gpu:
	$(PYTHON) tools/gpu_lane.py $(if $(WHEELS),--wheels $(WHEELS)) $(GPU_LANE)

# Mutation testing (cosmic-ray) of the modules listed in tools/mutation.py; not part of `make test`.
# `make mutation MUTATION_TARGETS="compare shell"` runs some; an interrupted run resumes where it stopped.
mutation: $(DEEPSPEED_STAMP)
	$(BIN)/python tools/mutation.py $(MUTATION_TARGETS)

lint: $(STAMP)
	$(BIN)/ruff check portlayer migrate reference_train tests tools bench examples setup.py

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .venv-torch* build *.egg-info
