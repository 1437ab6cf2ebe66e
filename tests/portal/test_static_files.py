"""Static files (kit/staticfiles.py): collected, each is served gzipped to a client that accepts
it, and under its hashed name cached for a year; not collected (tests, a bare runserver), they
are served from the source folders with nothing to collect first; /favicon.ico answers."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import call_command
from django.http import FileResponse
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parents[2]
PLOTLY = "vendor/plotly/plotly-finance.min.js"
A_YEAR_OR_MORE = re.compile(r"max-age=(\d+)")


def _body(response: FileResponse) -> bytes:
    """The whole body; the test client closes the response once it is read."""
    return b"".join(response.streaming_content)  # type: ignore[arg-type]


def _max_age(response: FileResponse) -> int:
    match = A_YEAR_OR_MORE.search(response["Cache-Control"])
    assert match, response["Cache-Control"]
    return int(match.group(1))


def _collected_settings(root: Path) -> override_settings:
    storage = {"BACKEND": "kit.staticfiles.HashedCompressedStorage"}
    return override_settings(
        STATIC_ROOT=root,
        STORAGES={**settings.STORAGES, "staticfiles": storage},
        STATICFILES_FINDERS=["django.contrib.staticfiles.finders.FileSystemFinder"],
        WHITENOISE_USE_FINDERS=False,
        WHITENOISE_AUTOREFRESH=False,
    )


@pytest.fixture(scope="module")
def collected_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's own static files collected once, as `make demo` and a deployment collect
    them (the apps' files, admin and API docs, are left out: speed)."""
    root = tmp_path_factory.mktemp("static")
    with _collected_settings(root):
        call_command("collectstatic", interactive=False, verbosity=0)
    return root


@pytest.fixture
def collected(collected_root: Path) -> Iterator[Path]:
    """The settings of a collected site, for one test."""
    with _collected_settings(collected_root):
        yield collected_root


def test_collected_the_bundle_is_served_gzipped_under_its_hashed_name_for_a_year(collected):
    url = staticfiles_storage.url(PLOTLY)
    assert re.fullmatch(r"/static/vendor/plotly/plotly-finance\.min\.[0-9a-f]{12}\.js", url)
    response = Client().get(url, headers={"accept-encoding": "gzip, deflate, br"})
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response["Vary"]
    assert "immutable" in response["Cache-Control"]
    assert _max_age(response) >= 365 * 24 * 3600
    compressed = _body(response)
    original = (ROOT / "static" / PLOTLY).read_bytes()
    assert gzip.decompress(compressed) == original
    assert len(compressed) < len(original) / 2


def test_collected_a_client_without_gzip_gets_the_file_as_it_is(collected):
    response = Client().get(staticfiles_storage.url("js/charts.js"))
    assert response.status_code == 200
    assert not response.has_header("Content-Encoding")
    assert _body(response) == (ROOT / "static" / "js" / "charts.js").read_bytes()


def test_collected_a_plain_name_is_not_cached_for_long(collected):
    response = Client().get("/static/js/charts.js", headers={"accept-encoding": "gzip"})
    assert response.status_code == 200
    assert "immutable" not in response["Cache-Control"]
    assert _max_age(response) <= 3600
    _body(response)


@pytest.mark.django_db
def test_collected_pages_link_the_hashed_names(collected):
    content = Client().get("/accounts/login/").content.decode()
    assert staticfiles_storage.url("css/portal.css") in content
    assert re.search(r'<link rel="icon" href="/static/root/favicon\.[0-9a-f]{12}\.ico"', content)


def test_not_collected_the_source_files_are_served_with_nothing_collected():
    assert settings.STORAGES["staticfiles"]["BACKEND"].endswith(".StaticFilesStorage")
    response = Client().get(f"/static/{PLOTLY}")
    assert response.status_code == 200
    assert _body(response) == (ROOT / "static" / PLOTLY).read_bytes()


@pytest.mark.django_db
def test_favicon_answers_at_the_root_and_pages_link_it():
    response = Client().get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] in {"image/x-icon", "image/vnd.microsoft.icon"}
    assert _body(response) == (ROOT / "static" / "root" / "favicon.ico").read_bytes()
    content = Client().get("/accounts/login/").content.decode()
    assert '<link rel="icon" href="/static/root/favicon.ico"' in content


def test_production_collects_hashed_and_compressed_files(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(
        PORTAL_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="portal.settings",
        PORTAL_PRODUCTION="1", DJANGO_SECRET_KEY="k" * 50, DJANGO_ALLOWED_HOSTS="su.example",
    )  # fmt: skip
    show = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.STORAGES['staticfiles']['BACKEND'], s.WHITENOISE_USE_FINDERS]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", show], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["kit.staticfiles.HashedCompressedStorage", False]
