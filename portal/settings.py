"""Settings of the allocation portal, read from the environment (see docs/configuration.md).

Two ways to run, chosen by what the environment provides:
- embedded (the default, ``make demo``): SQLite in ``var/``, Celery tasks run eagerly in-process;
- deployment: ``DATABASE_URL`` (PostgreSQL) and ``CELERY_BROKER_URL`` (Redis) are set, and
  ``PORTAL_PRODUCTION=1`` turns on the hardened settings that ``check --deploy`` expects.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from kit.env import (
    env_bool,
    env_int,
    env_int_list,
    env_list,
    env_optional,
    env_secret,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PORTAL_VAR_DIR", str(BASE_DIR / "var")))

PRODUCTION = env_bool("PORTAL_PRODUCTION", False)
DEBUG = env_bool("DJANGO_DEBUG", not PRODUCTION)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DJANGO_DEBUG must be off when PORTAL_PRODUCTION is on")

_secret = env_secret("DJANGO_SECRET_KEY")
if _secret is None:
    if PRODUCTION:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) is required")
    _secret = "insecure-development-key-only-for-the-embedded-demo"  # noqa: S105
SECRET_KEY = _secret

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost"])
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS is required in production")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",  # runserver leaves static files to WhiteNoise, as gunicorn
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",
    "mozilla_django_oidc",
    "auditlog",
    "projects",
    "accounting",
    "allocations",
    "people",
    "portal",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files (kit/staticfiles.py)
    "kit.compression.DataGZipMiddleware",  # JSON and CSV gzipped, pages never (BREACH)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "portal.audit.AuditActorMiddleware",  # the signed-in person is the audit log's actor
    "django.contrib.messages.middleware.MessageMiddleware",
    "portal.readonly.ReadOnlyProjectMiddleware",  # a page's write to an archived project
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it turns a locked-out sign-in into a 429
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # numbers and dates as people read them, in every template (kit/numbers.py)
            "builtins": ["kit.template_filters"],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = env_optional("DATABASE_URL")
if DATABASE_URL:
    DATABASES: dict[str, dict[str, Any]] = {
        "default": dict(
            dj_database_url.parse(
                DATABASE_URL, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
            )
        )
    }
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "portal.sqlite3",
            # Web and worker share the file: take the write lock at BEGIN and wait for it.
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
DATABASE_PASSWORD = env_secret("DATABASE_PASSWORD")
if DATABASE_PASSWORD is not None:
    DATABASES["default"]["PASSWORD"] = DATABASE_PASSWORD

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# --- Sign-in (docs/sign-in.md) -------------------------------------------------------------
# Which groups of the centre's identity provider (an OIDC claim or LDAP groups) make a person
# staff or an allocation-committee member; people/roles.py applies them at every sign-in.
PORTAL_SSO_STAFF_GROUPS = env_list("PORTAL_SSO_STAFF_GROUPS", ["hpc-staff"])
PORTAL_SSO_COMMITTEE_GROUPS = env_list("PORTAL_SSO_COMMITTEE_GROUPS", ["allocation-committee"])
# First, the lockout: it refuses a locked account or address before any backend checks.
AUTHENTICATION_BACKENDS: list[str] = ["axes.backends.AxesStandaloneBackend"]
# Lockout after PORTAL_LOGIN_FAILURE_LIMIT failures, per account (the username folded as LDAP
# folds it) and per address, for PORTAL_LOGIN_LOCKOUT_MINUTES (people/lockout.py).
AXES_FAILURE_LIMIT = env_int("PORTAL_LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("PORTAL_LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = "people.lockout.lockout_parameters"  # the account and the address
AXES_USERNAME_CALLABLE = "people.lockout.lockout_username"
# Not axes' reset: it deletes every failure of the address, so signing in as oneself wiped the
# guesses made at another account. A success forgives only the same account from the same
# address (people.lockout.failures_forgive).
AXES_RESET_ON_SUCCESS = False
AXES_LOCKOUT_CALLABLE = "people.lockout.lockout_response"
AXES_CLIENT_IP_CALLABLE = "people.lockout.client_address"
AXES_VERBOSE = False
# Password-reset mails, at most so many per e-mail address typed and per client address in a
# sliding window; counted in the database, so across every web process (people/passwords.py).
PORTAL_PASSWORD_RESET_PER_ACCOUNT = env_int("PORTAL_PASSWORD_RESET_PER_ACCOUNT", 3, minimum=1)
PORTAL_PASSWORD_RESET_PER_ADDRESS = env_int("PORTAL_PASSWORD_RESET_PER_ADDRESS", 10, minimum=1)
PORTAL_PASSWORD_RESET_WINDOW_MINUTES = env_int(
    "PORTAL_PASSWORD_RESET_WINDOW_MINUTES", 60, minimum=1
)
# Reverse proxies in front of the portal that set X-Forwarded-For (0: clients connect directly).
PORTAL_TRUSTED_PROXY_COUNT = env_int("PORTAL_TRUSTED_PROXY_COUNT", 0, minimum=0)

# --- Single sign-on with OpenID Connect (people/oidc.py) -----------------------------------
# On when PORTAL_OIDC_ISSUER is set; the endpoints come from the issuer's discovery document.
PORTAL_OIDC_ISSUER = env_optional("PORTAL_OIDC_ISSUER")
PORTAL_OIDC_NAME = env_str("PORTAL_OIDC_NAME", "your centre account")  # on the sign-in button
PORTAL_OIDC_USERNAME_CLAIM = env_str("PORTAL_OIDC_USERNAME_CLAIM", "preferred_username")
PORTAL_OIDC_GROUPS_CLAIM = env_str("PORTAL_OIDC_GROUPS_CLAIM", "groups")
OIDC_RP_CLIENT_ID = env_str("PORTAL_OIDC_CLIENT_ID", "su-portal")
OIDC_RP_CLIENT_SECRET = env_secret("PORTAL_OIDC_CLIENT_SECRET") or ""
OIDC_RP_SIGN_ALGO = env_str("PORTAL_OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("PORTAL_OIDC_SCOPES", "openid email profile groups")
OIDC_USE_PKCE = True
OIDC_AUTHENTICATE_CLASS = "people.oidc.CentreSignInStart"
OIDC_CALLBACK_CLASS = "people.oidc.CentreSignInCallback"  # a refusal: the sign-in page
OIDC_STORE_ACCESS_TOKEN = False
OIDC_STORE_ID_TOKEN = False
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=failed"
if PORTAL_OIDC_ISSUER:
    if PRODUCTION and not PORTAL_OIDC_ISSUER.startswith("https://"):
        raise ImproperlyConfigured("PORTAL_OIDC_ISSUER must be an https:// URL in production")
    if not OIDC_RP_CLIENT_SECRET:
        raise ImproperlyConfigured(
            "PORTAL_OIDC_CLIENT_SECRET (or PORTAL_OIDC_CLIENT_SECRET_FILE) is required with SSO"
        )
    AUTHENTICATION_BACKENDS.append("people.oidc.CentreOIDCBackend")
# Personal API tokens (/account/tokens/): how long they may live, and the lifetime of one
# bought with a password at POST /api/v1/auth/token/.
PORTAL_TOKEN_MAX_DAYS = env_int("PORTAL_TOKEN_MAX_DAYS", 365, minimum=1)
PORTAL_TOKEN_DEFAULT_DAYS = env_int("PORTAL_TOKEN_DEFAULT_DAYS", 90, minimum=1)
if PORTAL_TOKEN_DEFAULT_DAYS > PORTAL_TOKEN_MAX_DAYS:
    raise ImproperlyConfigured("PORTAL_TOKEN_DEFAULT_DAYS must not exceed PORTAL_TOKEN_MAX_DAYS")
# The sections below add the centre's identity providers; passwords stored in the portal come
# last and may be turned off (PORTAL_PASSWORD_LOGIN=0) when SSO is on.

# LDAP (docs/sign-in.md#ldap): on when PORTAL_LDAP_URI is set. The username is the person's
# uid, their Slurm login; people/ldap.py applies the roles of their LDAP groups at each sign-in.
# python-ldap and django-auth-ldap are in requirements-ldap.txt, not requirements.txt: a centre
# that asks for LDAP without them stops here, rather than start and never sign anyone in.
PORTAL_LDAP_URI = env_optional("PORTAL_LDAP_URI")
if PORTAL_LDAP_URI:
    try:
        import ldap
        from django_auth_ldap.config import GroupOfNamesType, LDAPSearch, PosixGroupType
    except ImportError as error:
        raise ImproperlyConfigured(
            f"PORTAL_LDAP_URI is set but LDAP sign-in is not installed ({error}): "
            "pip install -r requirements-ldap.txt (python-ldap compiles against the Debian "
            "packages libldap2-dev and libsasl2-dev; `make install-ldap` does both)"
        ) from error

    AUTHENTICATION_BACKENDS.append("django_auth_ldap.backend.LDAPBackend")
    AUTH_LDAP_SERVER_URI = PORTAL_LDAP_URI
    AUTH_LDAP_START_TLS = env_bool("PORTAL_LDAP_START_TLS", False)
    if PRODUCTION and PORTAL_LDAP_URI.startswith("ldap://") and not AUTH_LDAP_START_TLS:
        raise ImproperlyConfigured(
            "PORTAL_LDAP_URI sends passwords in clear: use ldaps:// or PORTAL_LDAP_START_TLS=1"
        )
    # Empty bind DN and password: an anonymous search for the person's entry.
    AUTH_LDAP_BIND_DN = env_str("PORTAL_LDAP_BIND_DN", "")
    AUTH_LDAP_BIND_PASSWORD = env_secret("PORTAL_LDAP_BIND_PASSWORD", "") or ""
    AUTH_LDAP_USER_SEARCH = LDAPSearch(
        env_str("PORTAL_LDAP_USER_BASE"),
        ldap.SCOPE_SUBTREE,
        env_str("PORTAL_LDAP_USER_FILTER", "(uid=%(user)s)"),
    )
    AUTH_LDAP_USER_ATTR_MAP = {"first_name": "givenName", "last_name": "sn", "email": "mail"}
    AUTH_LDAP_ALWAYS_UPDATE_USER = True  # names, e-mail and roles follow the directory
    AUTH_LDAP_FIND_GROUP_PERMS = False  # groups give roles (people/roles.py), not permissions
    # A directory that does not answer must not hold the sign-in page for long.
    _ldap_timeout_seconds = env_int("PORTAL_LDAP_TIMEOUT_SECONDS", 5, minimum=1)
    AUTH_LDAP_CONNECTION_OPTIONS = {
        ldap.OPT_NETWORK_TIMEOUT: _ldap_timeout_seconds,
        ldap.OPT_TIMEOUT: _ldap_timeout_seconds,
    }
    # Without a group base the directory names no roles, and staff set them by hand.
    _ldap_group_base = env_optional("PORTAL_LDAP_GROUP_BASE")
    _ldap_group_type = env_str("PORTAL_LDAP_GROUP_TYPE", "groupOfNames")
    _ldap_group_types = {"groupOfNames": GroupOfNamesType, "posixGroup": PosixGroupType}
    if _ldap_group_type not in _ldap_group_types:
        raise ImproperlyConfigured(
            f"PORTAL_LDAP_GROUP_TYPE={_ldap_group_type!r} is not one of "
            + ", ".join(_ldap_group_types)
        )
    AUTH_LDAP_GROUP_TYPE = _ldap_group_types[_ldap_group_type](name_attr="cn")
    AUTH_LDAP_GROUP_SEARCH = (
        LDAPSearch(_ldap_group_base, ldap.SCOPE_SUBTREE, f"(objectClass={_ldap_group_type})")
        if _ldap_group_base
        else None
    )

LANGUAGE_CODE = "en-gb"
TIME_ZONE = env_str("PORTAL_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# --- Static files (docs/configuration.md, "Static files") ------------------------------------
# plotly.js is vendored in static/vendor/plotly/ (the smallest bundle that draws the portal's
# traces), never a CDN. WhiteNoise serves static files from the web process (runserver,
# gunicorn; nginx serves /static/ itself in a deployment) and static/root/ at the site's root.
STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(VAR_DIR / "static")))
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_ROOT = BASE_DIR / "static" / "root"  # /favicon.ico
# Collected (production, `make demo`, `make run-web`): pages link the hashed names that
# collectstatic wrote to STATIC_ROOT, with a .gz beside each, and WhiteNoise serves
# those alone, a hashed name with a far-future Cache-Control. Not collected (tests, a bare
# runserver): plain names found in the source folders, nothing to collect first.
STATIC_COLLECTED = env_bool("PORTAL_STATIC_COLLECTED", PRODUCTION)
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "kit.staticfiles.HashedCompressedStorage"
            if STATIC_COLLECTED
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = not STATIC_COLLECTED
# Not collected: each file is looked up when asked for, not every file scanned at start (a
# test client starts the middleware anew: 18 ms each with the scan).
WHITENOISE_AUTOREFRESH = not STATIC_COLLECTED
# A name missing from the manifest is hashed from its collected file, not an error page.
WHITENOISE_MANIFEST_STRICT = False

# --- REST framework ------------------------------------------------------------------------
# The API under /api/v1/ (docs/api.md); the shared pieces are in portal/api.py.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "people.authentication.PersonalTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "people.authentication.AnonymousRequestsCounted",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_FILTER_BACKENDS": [
        "kit.filters.ApiFilterBackend",  # django-filter's, refusing empty filter values
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.UserRateThrottle",
    ],
    # Counted in the cache: shared by every process with PORTAL_CACHE_URL, else per process
    # (and per process too while Redis is away: kit/cache_backend.py).
    "NUM_PROXIES": PORTAL_TRUSTED_PROXY_COUNT,  # the same client address as the lockout
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("PORTAL_API_ANON_RATE", "60/minute"),
        "user": env_str("PORTAL_API_USER_RATE", "6000/minute"),
        "token": env_str("PORTAL_API_TOKEN_RATE", "20/minute"),
    },
    "DEFAULT_SCHEMA_CLASS": "kit.api.ApiAutoSchema",
    "EXCEPTION_HANDLER": "kit.api.api_exception_handler",
    "COERCE_DECIMAL_TO_STRING": True,
    "DATETIME_FORMAT": "iso-8601",
}
# A CSRF failure Django's middleware answers itself (a view not exempt): JSON under /api/.
CSRF_FAILURE_VIEW = "kit.api.csrf_failure"
SPECTACULAR_SETTINGS = {
    "TITLE": "SU portal API",
    "DESCRIPTION": (
        "Allocations, balances, jobs and usage of the SU portal. Authenticate with "
        "`Authorization: Token <token>` (make one at /account/tokens/) or a portal session. "
        "SU are decimal strings, times ISO 8601 in UTC. See docs/api.md."
    ),
    "VERSION": "1.0.0",
    # Credentials the schema documents; the anonymous-request counter is not one.
    "AUTHENTICATION_WHITELIST": [
        "people.authentication.PersonalTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",  # served from static files: the docs work offline
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "AdjustmentKindEnum": "allocations.models.Adjustment.Kind",
        "RequestKindEnum": "allocations.models.AllocationRequest.Kind",
        "MembershipRoleEnum": "projects.models.Membership.Role",
        "InvitableRoleEnum": "projects.models.INVITABLE_ROLES",
        "GrantStatusEnum": "allocations.grants.budget.GRANT_STATUS_CHOICES",
        "ResearchOutputKindEnum": "allocations.models.ResearchOutput.Kind",
        "WhatIfMethodEnum": "allocations.models.WhatIfDraft.Method",
        # The explorer's pick: the CPU node, the GPU node, or the same on both.
        "ExplorerSideEnum": ["cpu", "gpu", "same"],
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "kit.api.add_error_responses",
    ],
}

# --- Celery --------------------------------------------------------------------------------
CELERY_BROKER_URL = env_optional("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
CELERY_TASK_EAGER_PROPAGATES = True
if CELERY_BROKER_URL is None:
    CELERY_BROKER_URL = "memory://localhost/"  # named: kombu warns of a URL without a host
CELERY_RESULT_BACKEND = env_optional("CELERY_RESULT_BACKEND") or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else None
)
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_DEFAULT_QUEUE = "portal"
# Chart data, other figures that change only with the ledger (kit/caching.py) and the API's
# throttle counts: Redis when PORTAL_CACHE_URL is set (shared by every web process), local
# memory otherwise. A Redis that does not answer degrades to each process's local memory, with
# a log line, instead of failing requests (kit/cache_backend.py).
CACHE_URL = env_str("PORTAL_CACHE_URL", "")
CACHES = {
    "default": (
        {
            "BACKEND": "kit.cache_backend.FallbackRedisCache",
            "LOCATION": CACHE_URL,
            "OPTIONS": {
                # A cache call never holds a request for long; after a failure Redis is tried
                # again at most every RETRY_SECONDS.
                "socket_connect_timeout": 1,
                "socket_timeout": 1,
                "RETRY_SECONDS": env_int("PORTAL_CACHE_RETRY_SECONDS", 5, minimum=1),
            },
        }
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "portal"}
    )
}
# /healthz/ and /readyz/ (portal/health.py): how long each check of the cache and the broker
# may wait for an answer.
PORTAL_HEALTH_TIMEOUT_SECONDS = env_int("PORTAL_HEALTH_TIMEOUT_SECONDS", 1, minimum=1)
CELERY_TASK_ROUTES = {"accounting.tasks.*import*": {"queue": "imports"}}
# Where Slurm's commands (sacctmgr, scontrol) are, when not on the PATH of the web host.
SLURM_BIN_DIR = env_str("SLURM_BIN_DIR", "")

# Each import batch is written on a second connection while the next is priced (on
# PostgreSQL, outside a caller's transaction): docs/importing.md, "Batches overlapped".
IMPORT_OVERLAP = env_bool("PORTAL_IMPORT_OVERLAP", True)
# Lines per import batch: one transaction each (jobs, roll-ups and counters), the most a
# killed import redoes. Larger batches spread the per-batch work (polars calls, the key probe,
# the upserts) over more lines and hold more in memory: docs/importing.md, "Batch size".
IMPORT_BATCH_LINES = env_int("PORTAL_IMPORT_BATCH_LINES", 10_000, minimum=1)

# Test-only fault injection: the importing process kills itself (SIGKILL) right after its Nth
# batch commits, so fault tests stop an import at a chosen point, never after a sleep. 0: off.
IMPORT_FAULT_AFTER_BATCH = env_int("PORTAL_IMPORT_FAULT_AFTER_BATCH", 0, minimum=0)
# With it, the process runs this shell command there instead (and goes on once it returns): a
# test restarts the database or stops the broker at a chosen batch. Empty: the SIGKILL.
IMPORT_FAULT_COMMAND = env_str("PORTAL_IMPORT_FAULT_COMMAND", "")
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 55 * 60, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 60 * 60, minimum=1)
CELERY_TASK_ACKS_LATE = True  # a task killed with its worker is delivered again
# Redis hands a task that was taken and never acknowledged (its worker was killed) to another
# worker after the visibility timeout: it must be longer than any task may run (the longest
# time limit of accounting.tasks is an hour), or a task still running would be delivered twice.
# The recovery task (below) picks up a killed import long before; the redelivered message
# then finds its run finished and stands down. A send gives up after a short connect timeout
# and one retry (kit/queue.py), so an upload while Redis is down fails at once, not after 20 s.
LONGEST_TASK_TIME_LIMIT = max(CELERY_TASK_TIME_LIMIT, 60 * 60)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": LONGEST_TASK_TIME_LIMIT + 10 * 60,
    "socket_connect_timeout": env_int("PORTAL_BROKER_CONNECT_TIMEOUT_SECONDS", 2, minimum=1),
}
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
# Static entries; each cluster's sacct import is added by the portal (django-celery-beat).
CELERY_BEAT_SCHEDULE = {
    "balances-thresholds": {"task": "allocations.tasks.thresholds_check", "schedule": 15 * 60},
    "priority-proposals": {"task": "allocations.tasks.priority_proposals", "schedule": 60 * 60},
    # Last month's efficiency summary to each PI, on the 1st (the task mails each PI once).
    "efficiency-summaries": {
        "task": "allocations.tasks.efficiency_summaries",
        "schedule": crontab(minute="0", hour="6", day_of_month="1"),
    },
    # Grants ending: notices, final summaries, projects expired and archived (idempotent).
    "grant-endings": {
        "task": "allocations.tasks.grant_endings",
        "schedule": crontab(minute="30", hour="5"),
    },
    # The portal against each cluster's Slurm associations (docs/slurm.md).
    "slurm-sync-check": {"task": "allocations.tasks.slurm_sync_check", "schedule": 60 * 60},
    # Yesterday's true overhead of each cluster, once a day (the task skips days already done).
    "overhead-daily": {"task": "accounting.tasks.overhead_compute_daily", "schedule": 60 * 60},
    # The jobs ledger's monthly partitions, made ahead of the months (PostgreSQL).
    "ledger-partitions": {
        "task": "accounting.tasks.ledger_partitions_ahead",
        "schedule": 24 * 3600,
    },
    # Staff uploads, deleted PORTAL_UPLOAD_RETENTION_DAYS after their run finished.
    "uploads-expire": {"task": "accounting.tasks.uploads_expire", "schedule": 60 * 60},
    # Import runs that stopped giving signs of life: queued again from their last batch, or
    # failed with the reason (docs/importing.md, "Runs that finish themselves").
    "import-runs-recover": {"task": "accounting.tasks.import_runs_recover", "schedule": 5 * 60},
}
# An import run without a committed batch (its heartbeat) for this long is stale: the recovery
# task queues it again or fails it. Longer than any batch takes (seconds) and than sacct takes
# to print its first 5,000 lines.
IMPORT_STALE_MINUTES = env_int("PORTAL_IMPORT_STALE_MINUTES", 15, minimum=1)
# How many times an import run is started in all (the first attempt and its recoveries).
IMPORT_MAX_ATTEMPTS = env_int("PORTAL_IMPORT_MAX_ATTEMPTS", 3, minimum=1)
# Days a staff upload (var/uploads/) is kept after its import finished; 0 keeps them forever.
PORTAL_UPLOAD_RETENTION_DAYS = env_int("PORTAL_UPLOAD_RETENTION_DAYS", 30, minimum=0)

# --- E-mail (balances crossing thresholds notify PIs) --------------------------------------
# Embedded (make demo): each mail is a file in var/mail/, not a page of the terminal's output.
EMAIL_BACKEND = env_str(
    "DJANGO_EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if PRODUCTION
    else "django.core.mail.backends.console.EmailBackend"
    if DATABASE_URL
    else "django.core.mail.backends.filebased.EmailBackend",
)
EMAIL_FILE_PATH = VAR_DIR / "mail"
EMAIL_HOST = env_str("DJANGO_EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("DJANGO_EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_PASSWORD = env_secret("DJANGO_EMAIL_HOST_PASSWORD", "") or ""
DEFAULT_FROM_EMAIL = env_str("DJANGO_DEFAULT_FROM_EMAIL", "su-portal@localhost")
# How long an invitation to a project stays open (allocations/invitations.py).
PORTAL_INVITATION_DAYS = env_int("PORTAL_INVITATION_DAYS", 14, minimum=1)
# When a grant ends (docs/allocations.md): notices to the PI and managers this many days before,
# and an expired project (no grant current or future) archived, read-only, after this many days.
PORTAL_GRANT_EXPIRY_NOTICE_DAYS = env_int_list(
    "PORTAL_GRANT_EXPIRY_NOTICE_DAYS", [30, 14, 7], minimum=1
)
PORTAL_ARCHIVE_AFTER_DAYS = env_int("PORTAL_ARCHIVE_AFTER_DAYS", 90, minimum=0)
# Research outputs (docs/allocations.md, "Research outputs"): filling a publication from its
# DOI is off unless this names a resolver such as "https://doi.org/" (the portal works offline).
PORTAL_DOI_LOOKUP_URL = env_str("PORTAL_DOI_LOOKUP_URL", "")
if PORTAL_DOI_LOOKUP_URL and not PORTAL_DOI_LOOKUP_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("PORTAL_DOI_LOOKUP_URL must be an http(s):// URL, or empty")
PORTAL_DOI_LOOKUP_TIMEOUT_SECONDS = env_int("PORTAL_DOI_LOOKUP_TIMEOUT_SECONDS", 5, minimum=1)
# Project requests (docs/allocations.md, "Asking for a new project"): who approves them besides
# staff (members of this Django group; blank: staff alone), and the prefix of the next code.
PORTAL_PROJECT_APPROVERS_GROUP = env_str("PORTAL_PROJECT_APPROVERS_GROUP", "")
PORTAL_PROJECT_CODE_PREFIX = env_str("PORTAL_PROJECT_CODE_PREFIX", "pawsey")
# The portal's own address, for the links in its mails (requests, invitations, alerts).
PORTAL_URL = env_str("PORTAL_URL", "http://127.0.0.1:8000")
# Who signs the decision letters (docs/allocations.md, "Decision letters"): the centre's name,
# and its postal address with "|" between lines.
PORTAL_CENTRE_NAME = env_str("PORTAL_CENTRE_NAME", "Pawsey Supercomputing Research Centre")
PORTAL_CENTRE_ADDRESS = env_str(
    "PORTAL_CENTRE_ADDRESS", "1 Bryce Avenue|Kensington, Western Australia 6151"
)

# --- Production hardening (python manage.py check --deploy) --------------------------------
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    X_FRAME_OPTIONS = "DENY"
    # HSTS preload is a commitment a centre makes on purpose (it is hard to undo), so it is
    # opt-in; with it off, the check that recommends it is silenced deliberately.
    SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("PORTAL_LOG_LEVEL", "INFO")},
    # Tasks run in-process when embedded: a line per task run is noise there.
    "loggers": {
        "celery.app.trace": {"level": "WARNING" if CELERY_TASK_ALWAYS_EAGER else "INFO"},
        # django-axes logs every sign-in at INFO; lockouts are WARNING and still shown.
        "axes": {"level": "WARNING"},
    },
}

# --- Passwords stored in the portal: the last way in, and optional -------------------------
# Off by default in production when SSO is on: people then sign in only through the centre.
PORTAL_PASSWORD_LOGIN = env_bool("PORTAL_PASSWORD_LOGIN", not (PRODUCTION and PORTAL_OIDC_ISSUER))
if PORTAL_PASSWORD_LOGIN:
    AUTHENTICATION_BACKENDS.append("django.contrib.auth.backends.ModelBackend")
