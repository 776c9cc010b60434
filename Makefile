PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test bench lint clean

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

clean:
	rm -rf $(VENV) .pytest_cache build dist
