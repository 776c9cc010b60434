PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test bench lint clean matrix dist

$(STAMP): pyproject.toml requirements-pinned.txt
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements-pinned.txt
	$(VPY) -m pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VPY) examples/demo.py

test: $(STAMP)
	$(VPY) -m pytest -n 2 -q tests

bench: $(STAMP)
	$(VPY) benchmarks/run_all.py

lint: $(STAMP)
	$(VPY) -m ruff check compat legacy dynamo migration benchmarks

# Version matrix: `make matrix TORCH=2.14.1` runs the suite in .venv-torch2.14.1 with torch==TORCH
# and every other pin from requirements-pinned.txt. MATRIX_ARGS picks the tests, e.g.
# MATRIX_ARGS="-p no:xdist -q tests/symbolics tests/dynamo".
TORCH ?= 2.13.0
MATRIX_VENV = $(VENV)-torch$(TORCH)
MATRIX_ARGS ?= -n 2 -q tests

matrix:
	test -x $(MATRIX_VENV)/bin/python || $(PY) -m venv $(MATRIX_VENV)
	sed 's/^torch==.*/torch==$(TORCH)/' requirements-pinned.txt > $(MATRIX_VENV)/requirements.txt
	$(MATRIX_VENV)/bin/python -m pip install -q --upgrade pip
	$(MATRIX_VENV)/bin/python -m pip install -q -r $(MATRIX_VENV)/requirements.txt
	$(MATRIX_VENV)/bin/python -m pip install -q --no-deps -e .
	$(MATRIX_VENV)/bin/python -m pytest $(MATRIX_ARGS)

# The wheel (one top-level package, torch_onnx_compat: see hatch_build.py) and the sdist.
dist: $(STAMP)
	rm -rf dist
	$(VPY) -m pip wheel -q --no-deps --no-build-isolation -w dist .
	$(VPY) -c "from hatchling.build import build_sdist; print(build_sdist('dist'))"

clean:
	rm -rf $(VENV) $(VENV)-torch* .pytest_cache build dist
