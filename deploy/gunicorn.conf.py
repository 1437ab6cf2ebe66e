"""gunicorn's settings for the portal behind nginx (deploy/nginx.conf.template): ``make run-web``,
docker-compose.yml and the Dockerfile start gunicorn with ``-c deploy/gunicorn.conf.py`` and
give only the address to bind.

Sync workers serve one request at a time and are safe only because nginx hands them whole
requests and takes whole answers; never expose gunicorn to clients directly.
"""

import os


def _positive_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r}: expected a whole number") from None
    if value < 1:
        raise SystemExit(f"{name}={raw!r}: expected at least 1")
    return value


# The cores this process may run on (a CPU set or a container's share), not the host's count.
cores = len(os.sched_getaffinity(0))
# gunicorn's advice for sync workers: two per core plus one.
workers = _positive_int("PORTAL_WEB_WORKERS", 2 * cores + 1)
# A request reaches a worker whole (nginx buffered it), so this bounds the portal's own work,
# the longest being a 2 GiB upload copied and checksummed at disk speed. nginx's
# proxy_read_timeout is the same value (PORTAL_WEB_TIMEOUT, default 120 in deploy/nginx.py).
timeout = _positive_int("PORTAL_WEB_TIMEOUT", 120)
graceful_timeout = 30
accesslog = "-"
