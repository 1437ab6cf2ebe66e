# One entry point for people and CI. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Three installs, each a stamp: the runtime (requirements.txt: all `make demo` needs, no compiler
# and no root), LDAP sign-in on top (requirements-ldap.txt) and the test and lint tools
# (requirements-dev.txt, which includes both, as CI tests LDAP against a real slapd).
STAMP      := $(VENV)/.installed-runtime
STAMP_LDAP := $(VENV)/.installed-ldap
STAMP_DEV  := $(VENV)/.installed-dev
# Debian packages python-ldap (requirements-ldap.txt) compiles against; apt installs them when
# missing.
BUILD_DEBS := libldap2-dev libsasl2-dev
# The run-* targets serve a centre: with PORTAL_LDAP_URI set it signs in with LDAP.
RUN_INSTALL := $(if $(PORTAL_LDAP_URI),install-ldap,install)
HOST   ?= 127.0.0.1
PORT   ?= 8000
# The address every mail links to (docs/configuration.md, "Links in mails"): where the demo and
# the run-* targets serve, unless PORTAL_URL is given (a proxy's https://portal.example.org).
# Serving on every address (0.0.0.0, ::), mails name the machine instead.
LINK_HOST := $(if $(filter 0.0.0.0 :: [::],$(HOST)),$(shell hostname -f 2>/dev/null || hostname),$(HOST))
export PORTAL_URL ?= http://$(LINK_HOST):$(PORT)
# The run-* targets: nginx serves HOST:PORT and hands whole requests to gunicorn on a unix
# socket in the var dir (docs/configuration.md, "Web tier").
VAR_DIR := $(or $(PORTAL_VAR_DIR),$(CURDIR)/var)

# The services of a real deployment, started natively by the run-* targets below and described
# by docker-compose.yml (tests/test_compose.py checks that the two lists agree).
BACKING_SERVICES := postgres redis
NATIVE_SERVICES  := nginx web worker beat

.PHONY: help install install-ldap install-dev system-packages demo test lint format bench screenshots migrate run run-nginx run-web run-worker run-beat services clean

help:
	@echo "make demo    set up and serve the portal on http://$(HOST):$(PORT) (SQLite, eager Celery)"
	@echo "make test    set up and run the whole test suite (PostgreSQL/Redis when reachable)"
	@echo "make lint    ruff check, ruff format --check, mypy, lint-imports (architecture)"
	@echo "make bench   benchmarks (figures and ratios)"
	@echo "make screenshots  refresh docs/screenshots/ (Chromium via Playwright, SQLite)"
	@echo "make run     nginx in front of the web (gunicorn), worker and beat against DATABASE_URL / CELERY_BROKER_URL"
	@echo "make install-ldap  add LDAP sign-in (requirements-ldap.txt; apt-installs libldap2-dev, libsasl2-dev)"

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

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip

$(STAMP): requirements.txt | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

$(STAMP_LDAP): requirements.txt requirements-ldap.txt | $(PY)
	$(MAKE) -s system-packages
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt \
		-r requirements-ldap.txt
	touch $(STAMP) $(STAMP_LDAP)

# One pip run for everything (requirements-dev.txt includes the other two files).
$(STAMP_DEV): requirements.txt requirements-ldap.txt requirements-dev.txt | $(PY)
	$(MAKE) -s system-packages
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP) $(STAMP_LDAP) $(STAMP_DEV)

install: $(STAMP)
install-ldap: $(STAMP_LDAP)
install-dev: $(STAMP_DEV)

# The embedded demo: no services needed, whatever the shell's environment says. It installs
# requirements.txt only: no LDAP, so no compiler and no apt. Static files are collected as in a
# deployment (hashed names, gzipped; docs/configuration.md, "Static files"): about 4 s.
demo: export PORTAL_STATIC_COLLECTED ?= 1
demo: install
	env -u DATABASE_URL -u CELERY_BROKER_URL $(PY) manage.py migrate --noinput
	env -u DATABASE_URL -u CELERY_BROKER_URL $(PY) manage.py loaddemo
	$(PY) manage.py collectstatic --noinput --verbosity 0
	@echo "Serving on http://$(HOST):$(PORT)/ (Ctrl-C stops); mails link to $(PORTAL_URL)"
	env -u DATABASE_URL -u CELERY_BROKER_URL $(PY) manage.py runserver $(HOST):$(PORT)

# Two test processes (pytest-xdist): one waits on a browser, a daemon or a subprocess while the
# other runs; each has its own test database and Celery broker database, and takes a test module
# at a time (tests/conftest.py, pytest_xdist_make_scheduler).
# TEST_PROCESSES=0 runs the suite in one process.
TEST_PROCESSES ?= 2
test: install-dev
	@eval "$$($(PY) scripts/test_services.py)" && $(PY) -m pytest \
		$(if $(filter-out 0,$(TEST_PROCESSES)),-n $(TEST_PROCESSES)) $(PYTEST_ARGS)

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports

format: install-dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: install-dev
	$(PY) benchmarks/run.py $(BENCH_ARGS)

# The pages in Chromium at laptop and phone widths; the PNGs land in docs/screenshots/.
screenshots: install-dev
	env -u DATABASE_URL -u CELERY_BROKER_URL PORTAL_VAR_DIR=$(CURDIR)/var/screenshots \
		PORTAL_SCREENSHOTS=$(CURDIR)/docs/screenshots \
		$(PY) -m pytest -q -p no:cacheprovider tests/browser/test_screenshots.py

migrate: $(RUN_INSTALL)
	$(PY) manage.py migrate --noinput

services:
	@echo $(BACKING_SERVICES) $(NATIVE_SERVICES)

# nginx on HOST:PORT (Debian's nginx-light, apt-installed by root when missing).
run-nginx:
	scripts/nginx-proxy install
	scripts/nginx-proxy run --listen $(HOST):$(PORT)

# gunicorn for nginx only: workers from the cores (PORTAL_WEB_WORKERS overrides), settings in
# deploy/gunicorn.conf.py. nginx is one proxy hop: the client's address is the one it saw.
run-web: export PORTAL_TRUSTED_PROXY_COUNT ?= 1
run-web: export PORTAL_STATIC_COLLECTED ?= 1
run-web: $(RUN_INSTALL)
	@echo "$@: mails link to $(PORTAL_URL)"
	$(PY) manage.py collectstatic --noinput --verbosity 0
	mkdir -p $(VAR_DIR)/run
	$(VENV)/bin/gunicorn -c deploy/gunicorn.conf.py --bind unix:$(VAR_DIR)/run/gunicorn.sock portal.wsgi

run-worker: $(RUN_INSTALL)
	@echo "$@: mails link to $(PORTAL_URL)"
	$(VENV)/bin/celery -A portal worker --queues portal,imports --concurrency 2 --loglevel INFO

run-beat: $(RUN_INSTALL)
	@echo "$@: mails link to $(PORTAL_URL)"
	$(VENV)/bin/celery -A portal beat --loglevel INFO --scheduler django_celery_beat.schedulers:DatabaseScheduler

run: $(RUN_INSTALL) migrate
	@echo "Serving on http://$(HOST):$(PORT)/; mails link to $(PORTAL_URL)"
	$(MAKE) -j4 run-nginx run-web run-worker run-beat

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache .hypothesis
