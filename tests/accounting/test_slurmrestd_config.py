"""The slurmrestd source's own checks, before any Slurm is asked: the token file, the URL's
scheme, a slurmrestd that does not answer. (tests/slurm/test_slurmrestd_source.py reads the real
slurmrestd of the testbed.)"""

from __future__ import annotations

import socket
from datetime import UTC, datetime

import pytest

from accounting.ledger.sources import (
    SlurmrestdFailed,
    slurmrestd_jobs,
    slurmrestd_request,
    slurmrestd_token,
)
from accounting.models import Cluster

pytestmark = pytest.mark.django_db

SINCE, UNTIL = datetime(2026, 11, 22, 2, tzinfo=UTC), datetime(2026, 11, 22, 3, tzinfo=UTC)


@pytest.fixture
def cluster(tmp_path):
    token = tmp_path / "jwt"
    token.write_text("SLURM_JWT=eyJhbGciOiJIUzI1NiJ9.e30.sig\n")
    return Cluster.objects.create(
        name="restd", slurmrestd_url="http://127.0.0.1:6820/", slurmrestd_token_file=str(token)
    )


def test_the_request_asks_the_jobs_endpoint_for_the_window_widened_by_any_time_zone(cluster):
    request = slurmrestd_request(cluster=cluster, since=SINCE, until=UNTIL)
    assert request.full_url == (
        "http://127.0.0.1:6820/slurmdb/v0.0.38/jobs"
        "?start_time=2026-11-21T12%3A00%3A00&end_time=2026-11-22T17%3A00%3A00"
    )
    assert request.get_header("X-slurm-user-name") == "root"
    assert request.get_header("X-slurm-user-token") == "eyJhbGciOiJIUzI1NiJ9.e30.sig"


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read the slurmrestd token"), ("", "is empty"), ("SLURM_JWT=\n", "is empty")],
)
def test_a_missing_or_empty_token_file_is_named(cluster, tmp_path, content, message):
    path = tmp_path / "other.jwt"
    if content is not None:
        path.write_text(content)
    cluster.slurmrestd_token_file = str(path)
    with pytest.raises(SlurmrestdFailed, match=message):
        slurmrestd_token(cluster)


def test_only_http_and_https_urls_are_opened(cluster):
    cluster.slurmrestd_url = "file:///etc/passwd"
    with pytest.raises(SlurmrestdFailed, match="must be http:// or https://"):
        slurmrestd_request(cluster=cluster, since=SINCE, until=UNTIL)


def test_a_slurmrestd_that_does_not_answer_is_reported(cluster):
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cluster.slurmrestd_url = f"http://127.0.0.1:{port}"
    with (
        pytest.raises(
            SlurmrestdFailed, match=rf"cannot reach slurmrestd at http://127.0.0.1:{port}"
        ),
        slurmrestd_jobs(cluster=cluster, since=SINCE, until=UNTIL),
    ):
        pass
