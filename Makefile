# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check scrapy_neardup tests benchmarks
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check scrapy_neardup tests benchmarks
	$(BIN)/ruff format --check scrapy_neardup tests benchmarks

demo: $(STAMP)
	@echo "make demo: not yet - the crawl demo lands with the Scrapy integration issue."
	@echo "Meanwhile, compare two pages: $(BIN)/scrapy-neardup compare A.html B.html"

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/bench_signatures.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist
