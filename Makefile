# The README's two commands: `make demo` and `make test`.  Both (re)create .venv.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
TORCH   := torch==2.13.0

.PHONY: venv test demo lint verify clean image image-cuda

venv: $(STAMP)

# docker/install.sh, the grading images' own install path: torch first (the pinned CPU
# wheel, so that nothing below pulls a CUDA build), then ScaleGrade with its dev extras.
$(STAMP): pyproject.toml docker/install.sh
	bash docker/install.sh --venv $(VENV) --python $(PY) --torch '$(TORCH)' --extras dev --editable
	touch $(STAMP)

test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 tests

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

verify: venv
	$(BIN)/scalegrade verify

demo: venv
	$(BIN)/scalegrade verify
	$(BIN)/scalegrade calc transformer.param_count n_layers=24 d_model=2048 vocab=50000
	$(BIN)/scalegrade calc memory.model_state_bytes n_params=7e9
	$(BIN)/scalegrade calc budget.training_seconds total_flops=7.8e22 n_gpus=256 peak_flops=1e15 mfu=0.4
	$(BIN)/scalegrade calc collectives.ring_allreduce_seconds n_bytes=1GB n_workers=64 bandwidth=25GB/s latency=10us
	$(BIN)/scalegrade calc memory.kv_cache_bytes_per_token n_layers=80 n_kv_heads=8 d_head=128
	$(BIN)/scalegrade calc parallel.pipeline_bubble_fraction n_stages=16 n_microbatches=96
	$(BIN)/scalegrade calc roofline.ridge_intensity --gpu A100
	$(BIN)/scalegrade validate tdlsm/hw1 --students 200
	$(BIN)/scalegrade demo --out out/demo

# The grading images, with docker or podman (docker/build.sh; ENGINE=docker|podman,
# BASE=IMAGE or BASE=local for one made from Debian's packages, TORCH_WHEEL=FILE).
ENGINE      ?= auto
BASE        ?=
TORCH_WHEEL ?=
IMAGE_ARGS   = --engine $(ENGINE) $(if $(BASE),--base $(BASE)) $(if $(TORCH_WHEEL),--torch-wheel $(TORCH_WHEEL))

image:
	bash docker/build.sh cpu $(IMAGE_ARGS)

image-cuda:
	bash docker/build.sh cuda $(IMAGE_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
