# Two commands do all the set-up: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
BENCH_INSTALLED := $(VENV)/.bench-installed
TORCH := torch==2.13.0
BUNDLE := hookwidgets/static/widget.js
JS_SOURCES := $(shell find js/src -type f 2>/dev/null) js/build.mjs js/package.json js/package-lock.json
HOST ?= 127.0.0.1
PORT ?= 8888
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test test-python test-js test-floor lint typecheck format docs payloads screenshots chromium compiler frontend clean fuzz soak bench

# torch goes in first, from the CPU wheel: any unpinned torch requirement resolved on an empty
# environment would pull a multi-GB CUDA build. The editable install builds js/ (hatch-jupyter-builder).
# Each step says what it does first: a first run downloads torch and JupyterLab, minutes of otherwise silent work.
$(INSTALLED): pyproject.toml js/package.json js/package-lock.json
	@echo "demo: venv: $(VENV) (created with $(PYTHON) when missing)"
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	@echo "demo: torch: installing $(TORCH) first (a large download the first time: pip's progress below)"
	$(BIN)/python -m pip install $(TORCH)
	@echo "demo: package: installing hookwidgets from this clone with its dev extras (JupyterLab, pytest, ruff...)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

# The benchmarks' own dependencies (transformers, nnsight), after torch: naming torch's version makes pip fail
# rather than replace it with another build.
$(BENCH_INSTALLED): $(INSTALLED)
	$(BIN)/python -m pip install --quiet -e ".[bench]" $(TORCH)
	touch $@

# Rebuild the bundle whenever the frontend source changed since the last build.
$(BUNDLE): $(JS_SOURCES) | $(INSTALLED)
	@[ -d js/node_modules ] || echo "demo: npm: installing the frontend's packages into js/node_modules (npm ci)"
	[ -d js/node_modules ] || npm --prefix js ci --no-audit --no-fund
	@echo "demo: build: bundling js/src into $(BUNDLE)"
	npm --prefix js run build
	touch $@

frontend: $(BUNDLE)

chromium:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y chromium fonts-liberation; }

# The stats action compiles a small C kernel on first use (hookwidgets/core/capture/native.py); the tests check it loads.
compiler:
	@command -v cc >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y gcc libc6-dev; }

# JupyterLab serving the repository root (README.md and docs/ browsable), opened at notebooks/quickstart.ipynb; the
# URL printed carries the port the server really got (PORT is only asked for). OPEN=0: print it, open no browser.
OPEN ?= 1
demo: $(INSTALLED) $(BUNDLE)
	$(BIN)/python -m tools.demo --host $(HOST) --port $(PORT) $(if $(filter 0,$(OPEN)),--no-browser)

test: $(INSTALLED) $(BUNDLE) chromium compiler lint typecheck test-js test-python

# tsc checks js/src against its JSDoc types (js/tsconfig.json), the payloads' among them (js/src/payloads.js).
test-js: $(INSTALLED)
	[ -d js/node_modules ] || npm --prefix js ci --no-audit --no-fund
	npm --prefix js run typecheck
	npm --prefix js test

# Among them tests/release and tests/e2e/test_fresh_env_kernel.py: the wheel and sdist built from the bundle above
# (python -m build), the wheel installed into a fresh venv under pytest's temp dir, smoke- and browser-tested there.
# Two suites at once, one a core: the browser and release tests (servers, kernels, chromium, a wheel build: much of
# their time is waiting) beside everything else. The browser suite's output follows the other's.
BROWSER_SUITES = tests/e2e tests/release
test-python: $(INSTALLED) $(BUNDLE) chromium compiler
	@log=$$(mktemp); \
	$(BIN)/python -m pytest $(BROWSER_SUITES) -p no:cacheprovider >$$log 2>&1 & browser=$$!; \
	status=0; $(BIN)/python -m pytest $(addprefix --ignore=,$(BROWSER_SUITES)) || status=$$?; \
	wait $$browser || status=$$?; \
	echo "---- $(BROWSER_SUITES) ----"; cat $$log; rm -f $$log; exit $$status

# The heavy suites, outside `make test` (which runs ~100 fuzz cases and a 150-step soak).
# FUZZ_EXAMPLES=N runs more cases; a failure prints @reproduce_failure(...) to replay it exactly.
FUZZ_EXAMPLES ?= 1000
SOAK_STEPS ?= 2000

fuzz: $(INSTALLED) compiler
	HOOKWIDGETS_FUZZ=1 HOOKWIDGETS_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest tests/reliability/test_fuzz.py \
		-p no:cacheprovider --timeout=0 --hypothesis-show-statistics

soak: $(INSTALLED) compiler
	HOOKWIDGETS_SOAK_STEPS=$(SOAK_STEPS) $(BIN)/python -m pytest tests/reliability/test_soak.py \
		-p no:cacheprovider --timeout=0 -s

# Runs every script in bench/ and rewrites bench/RESULTS.md from their output (contract: bench/README.md).
# Run it on a quiet machine: the figures are ratios, but a busy machine makes them noisy.
bench: $(INSTALLED) $(BENCH_INSTALLED) $(BUNDLE) chromium compiler
	$(BIN)/python bench/report.py --output bench/RESULTS.md

# The unit tests on the lowest torch pyproject.toml declares, in a venv of their own: an optional check, outside
# `make test`. torch 2.3.0 from PyPI is, on Linux, a CUDA build that pulls ~2.5 GB of nvidia-* wheels;
# TORCH_FLOOR_INDEX=https://download.pytorch.org/whl/cpu takes the CPU build (~200 MB) from PyTorch's own index
# instead, where that index can be reached. Naming torch's version in the second install makes pip fail rather
# than replace it; transformers 5 turns its torch support off below torch 2.6, 4.57 only below 2.1.
FLOOR_VENV := .venv-floor
TORCH_FLOOR := torch==2.3.0
TORCH_FLOOR_INDEX ?=
FLOOR_PINS := "transformers>=4.48,<5"

test-floor: $(BUNDLE) compiler
	[ -x $(FLOOR_VENV)/bin/python ] || $(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --quiet $(TORCH_FLOOR) $(if $(TORCH_FLOOR_INDEX),--index-url $(TORCH_FLOOR_INDEX))
	$(FLOOR_VENV)/bin/python -m pip install --quiet -e ".[dev]" $(TORCH_FLOOR) $(FLOOR_PINS)
	$(FLOOR_VENV)/bin/python -c "import torch; print('torch', torch.__version__)"
	$(FLOOR_VENV)/bin/python -m pytest tests/unit -p no:cacheprovider

lint: $(INSTALLED)
	$(BIN)/ruff check hookwidgets tests tools $(wildcard bench)
	$(BIN)/ruff format --check hookwidgets tests tools $(wildcard bench)

# mypy over hookwidgets/, as pyproject.toml's [tool.mypy] sets it: the strict flags on hookwidgets.core.
typecheck: $(INSTALLED)
	$(BIN)/mypy

format: $(INSTALLED)
	$(BIN)/ruff format hookwidgets tests tools $(wildcard bench)
	$(BIN)/ruff check --fix hookwidgets tests tools $(wildcard bench)

# Rewrites docs/api.md from the code's signatures and docstrings and the hand-written blocks in docs/api/;
# tests/repo/test_api_docs.py fails while the page differs from what this writes.
docs: $(INSTALLED)
	$(BIN)/python -m tools.apidoc

# Rewrites js/src/payloads.js, the page's JSDoc types of the shapes in hookwidgets/widget/protocol.py;
# tests/repo/test_js_payloads.py fails while the file differs from what this writes.
payloads: $(INSTALLED)
	$(BIN)/python -m tools.js_payloads

# Browser tests write screenshots to artifacts/; this copies one per view into docs/ (README's gallery).
screenshots: $(INSTALLED) $(BUNDLE) chromium
	$(BIN)/python -m pytest tests/e2e -m e2e
	cp artifacts/e2e/quickstart-widget.png docs/screenshot-explorer.png
	for view in tree-10000-modules graph-autograd graph-dataflow inspector-node-hook summary-view hostile-names \
		notebook7-quickstart training-panel theme-dark-inspector theme-dark-training-panel layout-dark-900 \
		quickstart-graph-attribution gpt2-token-attribution-light gpt2-logit-lens gpt2-patch-sweep graph-big-fit \
		edit-picker-ablate-dim honest-state-run-error run-view-dark-600-x2 figures-token-map-hover \
		figures-attention-dark-600-x2 figures-feature-maps-light-600-x1 narrow-summary-600; do cp artifacts/e2e/$$view.png docs/screenshot-$$view.png || exit 1; done

clean:
	rm -rf $(VENV) $(FLOOR_VENV) hookwidgets/static js/node_modules artifacts .pytest_cache
