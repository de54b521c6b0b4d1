# medallion developer and CI entry points. Everything installs itself: `make test` on a fresh
# Debian 12 machine (as root, or with sudo) needs only git, make, python3 >= 3.11 and the network
# to PyPI, Maven Central and Debian's mirrors, and only the first time.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
PYTEST_ARGS ?=
# Two pytest workers (pytest-xdist), a module's tests kept together on one worker, so that one
# worker's waits on the servers, the JVM or the Debezium runner overlap the other's CPU work.
# Modules go out in the order tests/conftest.py gives them (slow ones first), not xdist's
# most-tests-first, which started the longest modules (few tests each) last; the modules sharing
# an expensive fixture (tests/conftest.py SCHEDULED_TOGETHER) go to one worker as one unit.
# PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2

.PHONY: help bootstrap bootstrap-system bootstrap-venv bootstrap-jars bootstrap-debezium test test-properties-deep demo \
	lint lock

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 20

bootstrap: ## Debian packages + .venv (pinned) + Delta jars + Debezium runner; no-op when in place
	@bash scripts/bootstrap.sh all

bootstrap-system: ## only the Debian packages (PostgreSQL 15, wal2json, MariaDB, chromium)
	@bash scripts/bootstrap.sh system

bootstrap-venv: ## only .venv
	@bash scripts/bootstrap.sh venv

bootstrap-jars: bootstrap-venv ## only Delta's jars in .cache/jars
	@bash scripts/bootstrap.sh jars

bootstrap-debezium: ## only Debezium Embedded + the tests' runner in .cache/debezium
	@bash scripts/bootstrap.sh debezium

test: bootstrap ## the whole test suite (PYTEST_ARGS=... to narrow it); no tests = failure
	@rc=0; $(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		$(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests; failing" >&2; exit 1; fi; \
	exit $$rc

test-properties-deep: bootstrap ## every Hypothesis property test with the deep profile (hundreds of examples each)
	HYPOTHESIS_PROFILE=deep $(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadfile \
		tests/unit/test_positions.py tests/unit/test_envelope.py tests/unit/test_silver_reference.py \
		tests/unit/test_masking.py tests/unit/test_sql.py tests/integration/test_cli.py \
		tests/integration/test_silver_properties.py $(PYTEST_ARGS)

demo: bootstrap ## run the end-to-end demo through the CLI
	$(VENV)/bin/medallion demo

lint: bootstrap-venv ## ruff + mypy (strict config from pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy tests

lock: ## regenerate requirements.lock from the current .venv
	@bash scripts/bootstrap.sh lock
