# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
DEMO_STAMP := $(VENV)/.installed

.PHONY: demo demo-redis demo-postgres test test-fast lint bench bench-quality clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# The demo needs the package alone, not the test tools.
$(DEMO_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $(DEMO_STAMP)

# Every test, spread over 3 pytest-xdist workers, which take one test at a time, the ones marked
# slow first. Three on two cores: a third of the tests' time is waiting (servers stopped
# mid-crawl, DOWNLOAD_DELAY, locks held), which the third fills. JOBS=1: in this process alone.
JOBS ?= 3
PYTEST := $(BIN)/python -m pytest $(if $(filter 1,$(JOBS)),,-n $(JOBS) --dist load --maxschedchunk 1)

test: $(STAMP)
	$(BIN)/ruff check scrapy_neardup tests benchmarks
	$(PYTEST)

# A developer's quick run: every test but those marked slow (CI runs them all: `make test`).
test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check scrapy_neardup tests benchmarks
	$(BIN)/ruff format --check scrapy_neardup tests benchmarks

# Serves example_project/site/ on 127.0.0.1, crawls it with the add-on in drop mode, prints
# the stats and the report's path (example_project/output/report.html).
demo: $(DEMO_STAMP)
	$(BIN)/python example_project/run_demo.py

# Two crawler processes sharing one local redis-server: scrapy-redis's queue and the Redis index
# (needs redis-server on the PATH: apt-get install redis-server).
demo-redis: $(DEMO_STAMP)
	$(BIN)/pip install -q -e '.[redis]' 'scrapy-redis>=0.9'
	$(BIN)/python example_project/run_redis_demo.py

# Two crawler processes, a site and its mirror, one PostgreSQL index on a throwaway local server
# (needs Debian's postgresql: apt-get install postgresql).
demo-postgres: $(DEMO_STAMP)
	$(BIN)/pip install -q -e '.[postgres]'
	$(BIN)/python example_project/run_postgres_demo.py

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/bench_signatures.py

# Precision/recall/F1 per data set and method, peers beside (builds the LLVM docs site on first run);
# INDEX=postgres (or redis) also runs every page through that index and an SQLite file, verdict by verdict.
bench-quality: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/bench_quality.py $(if $(INDEX),--index $(INDEX))

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist
