PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install symbolic-sources demo test test-slow test-no-torchscript bench bench-migration-ends bench-venv lint clean matrix matrix-venv matrix-all dist

$(STAMP): pyproject.toml requirements-pinned.txt
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements-pinned.txt
	$(VPY) -m pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP) symbolic-sources

# The pinned wheels carrying real third-party symbolics (requirements-symbolic-sources.txt, about
# 12 MB, downloaded once, read not installed) for tests/symbolics/test_real_symbolic_suite.py and
# bench_real_symbolics (the test and bench targets ask for it: CI runs no `make install`); without
# a registry their cases skip with the reason.
symbolic-sources: $(STAMP)
	-$(VPY) benchmarks/real_symbolics/sources.py

demo: $(STAMP)
	$(VPY) examples/demo.py

# make test: every test but those marked slow (fresh processes, one export per catalog case);
# make test-slow runs those (CI runs both, in two steps). Timings: README, Tests.
test: $(STAMP) symbolic-sources
	$(VPY) -m pytest -n 2 --dist worksteal -q -m "not slow" tests

test-slow: $(STAMP) symbolic-sources
	$(VPY) -m pytest -n 2 --dist worksteal -q -m slow tests

# The suite as on a torch that has removed the TorchScript exporter: the capability probe reports
# none (TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT=1), tests that need it are skipped with that reason
# (tests/helpers/no_torchscript.py). NO_TS_ARGS picks the tests.
NO_TS_ARGS ?= -n 2 --dist worksteal -q tests
test-no-torchscript: $(STAMP) symbolic-sources
	TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT=1 $(VPY) -m pytest $(NO_TS_ARGS)

bench: $(STAMP) symbolic-sources
	$(VPY) benchmarks/run_all.py

# transformers' export_pytorch (17 tiny models) and yolov5's export.py migrated onto torch's new
# exporter, verified (issue 30); several minutes on 2 cores, so not in run_all
bench-migration-ends: $(STAMP)
	$(VPY) benchmarks/migration_ends_real.py

lint: $(STAMP)
	$(VPY) -m ruff check compat legacy dynamo migration benchmarks

# Version matrix: `make matrix TORCH=2.15.0` runs the suite in .venv-torch2.15.0 with torch==TORCH
# and every other pin from requirements-pinned.txt. MATRIX_ARGS picks the tests, e.g.
# MATRIX_ARGS="-p no:xdist -q tests/symbolics tests/dynamo". `make matrix-venv TORCH=...` only builds
# the venv. torch is installed alone first, with its own dependencies (the registry's Linux wheels
# are CUDA builds: the nvidia-* wheels come with them, and the build runs on CPU), without pip's
# cache (it would hold a second copy of those GBs). A pip configuration that caps torch below
# TORCH (a constraint file) is bypassed for that one install only, and only when the capped install
# cannot give TORCH; the other pins are then installed with torch==TORCH as a constraint, so
# nothing can silently swap the torch under test.
TORCH ?= 2.13.0
MATRIX_VENV = $(VENV)-torch$(TORCH)
MATRIX_PY = $(MATRIX_VENV)/bin/python
MATRIX_ARGS ?= -n 2 -q tests

$(MATRIX_VENV)/.installed: pyproject.toml requirements-pinned.txt
	test -x $(MATRIX_PY) || $(PY) -m venv $(MATRIX_VENV)
	$(MATRIX_PY) -m pip install -q --upgrade pip
	echo 'torch==$(TORCH)' > $(MATRIX_VENV)/torch-constraint.txt
	grep -v '^torch==' requirements-pinned.txt > $(MATRIX_VENV)/requirements.txt
	$(MATRIX_PY) -m pip install -q --no-cache-dir 'torch==$(TORCH)' \
	  || PIP_CONFIG_FILE=/dev/null PIP_CONSTRAINT= PIP_RESUME_RETRIES=20 \
	       $(MATRIX_PY) -m pip install -q --no-cache-dir 'torch==$(TORCH)'
	$(MATRIX_PY) -m pip install -q -r $(MATRIX_VENV)/requirements.txt -c $(MATRIX_VENV)/torch-constraint.txt
	$(MATRIX_PY) -m pip install -q --no-deps -e .
	$(MATRIX_PY) -c "import torch, sys; v = torch.__version__.split('+')[0]; \
	  sys.exit(0 if v == '$(TORCH)' else f'torch {torch.__version__} installed, $(TORCH) asked')"
	touch $@

matrix-venv: $(MATRIX_VENV)/.installed

matrix: $(MATRIX_VENV)/.installed
	$(MATRIX_PY) -m pytest $(MATRIX_ARGS)

# Every release of the README's version table, one after the other (one install at a time: each
# CUDA venv is about 7 GB; MATRIX_CLEAN=1 removes each venv after its run).
MATRIX_TORCHES ?= 2.9.1 2.10.0 2.11.0 2.12.1 2.13.0 2.14.1 2.15.0
matrix-all:
	for t in $(MATRIX_TORCHES); do \
	  $(MAKE) matrix TORCH=$$t || exit 1; \
	  if [ "$(MATRIX_CLEAN)" = 1 ]; then rm -rf $(VENV)-torch$$t; fi; \
	done

# The venv benchmarks/bench_architectures.py measures in (torchvision and timm do not import with
# the pinned CPU torch): the matrix venv of BENCH_TORCH plus the model libraries, pinned, with
# torch and every project pin as constraints. The stamp holds BENCH_PKGS, so a change of them
# reinstalls. bench_architectures runs this target itself on first use.
BENCH_TORCH ?= 2.14.1
BENCH_PKGS ?= torchvision==0.29.1 timm==1.0.29 piper-tts==1.8.0
BENCH_VENV = $(VENV)-torch$(BENCH_TORCH)

bench-venv:
	$(MAKE) matrix-venv TORCH=$(BENCH_TORCH)
	grep -qxF '$(BENCH_PKGS)' $(BENCH_VENV)/.bench-installed 2>/dev/null || { \
	  $(BENCH_VENV)/bin/python -m pip install -q $(BENCH_PKGS) \
	    -c $(BENCH_VENV)/torch-constraint.txt -c $(BENCH_VENV)/requirements.txt \
	  && $(BENCH_VENV)/bin/python -c "import torchvision, timm, piper.train.vits.models" \
	  && echo '$(BENCH_PKGS)' > $(BENCH_VENV)/.bench-installed; }

# The wheel (one top-level package, torch_onnx_compat: see hatch_build.py) and the sdist.
dist: $(STAMP)
	rm -rf dist
	$(VPY) -m pip wheel -q --no-deps --no-build-isolation -w dist .
	$(VPY) -c "from hatchling.build import build_sdist; print(build_sdist('dist'))"

clean:
	rm -rf $(VENV) $(VENV)-torch* .pytest_cache build dist
