# moebench: the targets a newcomer guesses. `make run` and `make test` set up .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SCENARIO ?= scenarios/smoke.yaml
RESULTS ?= results

.PHONY: install run test test-slow test-all test-gpu lint fmt fuzz bench ci-bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,transformers]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/moebench run $(SCENARIO) --results $(RESULTS)

# The README's test command: two workers, the slow interpreter runs left to `make test-slow`
# (markers in pyproject.toml); CI runs both, so every test runs on every submission. The kernels
# run under the interpreter on any machine, as in CI: on a GPU machine the tests outside
# tests/kernels launch them on CPU tensors, which only the interpreter takes (`make test-gpu`
# compiles the GPU tests).
test: $(STAMP)
	TRITON_INTERPRET=1 $(BIN)/python -m pytest -n 2 -m "not slow"

test-slow: $(STAMP)
	TRITON_INTERPRET=1 $(BIN)/python -m pytest -n 2 -m slow

test-all: $(STAMP)
	TRITON_INTERPRET=1 $(BIN)/python -m pytest -n 2

# On a GPU machine, from the source tree without installing (docs/GUIDE.md "Running on a GPU"):
# the tests marked gpu (every kernel test, the *_gpu.py files, tests marked @pytest.mark.gpu;
# tests/conftest.py), compiled: TRITON_INTERPRET unset, so triton compiles for the GPU. Compiling
# is most of the time, on the CPU: GPU_TEST_WORKERS processes share the GPU (8: 603 tests in
# 133 s on an H100 against more than 520 s for one, 2026-12-07; 1 for no pytest-xdist).
GPU_TEST_WORKERS ?= 8
test-gpu:
	$(PYTHON) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else \
		'make test-gpu: no GPU visible; make test runs the kernels in the interpreter')"
	env -u TRITON_INTERPRET PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -p no:cacheprovider -m gpu \
		$(if $(filter-out 1,$(GPU_TEST_WORKERS)),-n $(GPU_TEST_WORKERS)) tests

# Style, then the architecture: import-linter's contracts (pyproject.toml) keep imports one way.
lint: $(STAMP)
	$(BIN)/ruff check moebench arms tests tools
	$(BIN)/ruff format --check moebench arms tests tools
	$(BIN)/lint-imports

# Hostile input outside pytest: 10,000 scenario documents and 10,000 trace files (docs/ROBUSTNESS.md).
fuzz: $(STAMP)
	$(BIN)/python tools/fuzz_scenarios.py

fmt: $(STAMP)
	$(BIN)/ruff format moebench arms tests tools
	$(BIN)/ruff check --fix moebench arms tests tools

# GPU benchmarks (run on the H200; see docs/GUIDE.md "Running on a GPU").
bench: $(STAMP)
	$(BIN)/moebench run scenarios/seed-act-microbench.yaml --results $(RESULTS)
	$(BIN)/moebench run scenarios/v4-flash-ep8.yaml --results $(RESULTS)
	$(BIN)/moebench run scenarios/gpt-oss-20b-decode.yaml --results $(RESULTS)

# The gating benchmark (tools/ci_bench.py): every gate must pass (exit 1 otherwise); on a GPU the
# run is also compared with the stored run of that GPU in baselines/ and a cell more than 5%
# slower fails it; on the CPU the timing gate is skipped, and it says so.
ci-bench: $(STAMP)
	$(BIN)/python tools/ci_bench.py $(RESULTS)/ci-bench

clean:
	rm -rf $(VENV) $(RESULTS) .pytest_cache .ruff_cache
