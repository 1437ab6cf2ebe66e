# One entry point for people and CI. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Debian packages python-ldap (requirements.txt) compiles against; apt installs them when missing.
BUILD_DEBS := libldap2-dev libsasl2-dev
HOST   ?= 127.0.0.1
PORT   ?= 8000

# The services of a real deployment, started natively by the run-* targets below and described
# by docker-compose.yml (tests/test_compose.py checks that the two lists agree).
BACKING_SERVICES := postgres redis
NATIVE_SERVICES  := web worker beat

.PHONY: help install system-packages demo test lint format bench screenshots migrate run run-web run-worker run-beat services clean

help:
	@echo "make demo    set up and serve the portal on http://$(HOST):$(PORT) (SQLite, eager Celery)"
	@echo "make test    set up and run the whole test suite (PostgreSQL/Redis when reachable)"
	@echo "make lint    ruff check, ruff format --check, mypy, lint-imports (architecture)"
	@echo "make bench   benchmarks (figures and ratios)"
	@echo "make screenshots  refresh docs/screenshots/ (Chromium via Playwright, SQLite)"
	@echo "make run     web (gunicorn), worker and beat against DATABASE_URL / CELERY_BROKER_URL"

# Root installs what is missing (noninteractive); anyone else is told which packages to install.
system-packages:
	@missing=""; for deb in $(BUILD_DEBS); do \
		dpkg-query -W -f='$${Status}' $$deb 2>/dev/null | grep -q "ok installed" \
			|| missing="$$missing $$deb"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then \
			echo "install the Debian packages$$missing (python-ldap compiles against them)"; exit 1; \
		fi; \
		echo "apt-get install$$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(STAMP): requirements.txt requirements-dev.txt
	$(MAKE) -s system-packages
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

# The embedded demo: no services needed, whatever the shell's environment says.
demo: install
	env -u DATABASE_URL -u CELERY_BROKER_URL $(PY) manage.py migrate --noinput
	env -u DATABASE_URL -u CELERY_BROKER_URL $(PY) manage.py loaddemo
	@echo "Serving on http://$(HOST):$(PORT)/ (Ctrl-C stops)"
	env -u DATABASE_URL -u CELERY_BROKER_URL $(PY) manage.py runserver $(HOST):$(PORT)

test: install
	@eval "$$($(PY) scripts/test_services.py)" && $(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: install
	$(PY) benchmarks/run.py $(BENCH_ARGS)

# The pages in Chromium at laptop and phone widths; the PNGs land in docs/screenshots/.
screenshots: install
	env -u DATABASE_URL -u CELERY_BROKER_URL PORTAL_VAR_DIR=$(CURDIR)/var/screenshots \
		PORTAL_SCREENSHOTS=$(CURDIR)/docs/screenshots \
		$(PY) -m pytest -q -p no:cacheprovider tests/browser/test_screenshots.py

migrate: install
	$(PY) manage.py migrate --noinput

services:
	@echo $(BACKING_SERVICES) $(NATIVE_SERVICES)

run-web: install
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(VENV)/bin/gunicorn portal.wsgi --bind $(HOST):$(PORT) --workers 2 --access-logfile -

run-worker: install
	$(VENV)/bin/celery -A portal worker --queues portal,imports --concurrency 2 --loglevel INFO

run-beat: install
	$(VENV)/bin/celery -A portal beat --loglevel INFO --scheduler django_celery_beat.schedulers:DatabaseScheduler

run: install migrate
	$(MAKE) -j3 run-web run-worker run-beat

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache .hypothesis
