# fluid-hw: the two commands of the README, each doing its own set-up.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint proto bench gpu-check clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/fluid-hw demo

test: $(STAMP)
	$(BIN)/ruff check fluid_hw tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/pytest -q -n 2 tests

# ruff, then mypy over fluid_hw ([tool.mypy] in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check fluid_hw tests benchmarks examples
	$(BIN)/mypy

# Regenerate the protobuf module from fluid_hw/ir/framework.proto (committed).
proto: $(STAMP)
	$(BIN)/python -m fluid_hw.ir.gen_proto

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_cpu_executor.py
	$(BIN)/python benchmarks/bench_passes.py
	$(BIN)/python benchmarks/bench_cluster.py

# On a GPU machine (CuPy, numpy, protobuf, scikit-learn installed; no internet):
# the `gpu` tests and the GPU benchmark, in one prepared command.
gpu-check:
	bash benchmarks/gpu_check.sh

clean:
	rm -rf $(VENV) build *.egg-info
