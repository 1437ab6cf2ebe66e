#!/usr/bin/env python3
"""su-balance: the Service Unit balances of your projects, from the SU portal.

    su-balance [-p PROJECT] [--users] [--year] [--json]

For login nodes: one file, the standard library of Python 3.8 or later, nothing else. Install
it as a command with ``install -m 755 su_balance.py /usr/local/bin/su-balance`` (or run
``clients/su-balance`` from the repository).

- The portal's address comes from ``SU_PORTAL_URL`` (or ``DEFAULT_URL`` below, which a centre
  may set when it installs the script).
- Your API token comes from ``SU_PORTAL_TOKEN`` or the file ``~/.config/su-portal/token``
  (``chmod 600`` it). Make one on the portal's page ``$SU_PORTAL_URL/account/tokens/``
  (a read-only token is enough).

Exit status: 0 fine, 1 other failure, 2 usage or configuration, 3 token refused,
4 project not found (or not yours), 5 portal unreachable.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import stat
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any

DEFAULT_URL = ""  # e.g. "https://portal.example.org"; SU_PORTAL_URL wins
TOKEN_FILE = "~/.config/su-portal/token"  # noqa: S105 (a path, not a secret)
TIMEOUT_SECONDS = 20.0
PAGE_SIZE = 1000
VERSION = "1.0"

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_TOKEN, EXIT_NOT_FOUND, EXIT_UNREACHABLE = range(6)


class Failure(Exception):
    """Something the user should read, with the exit status it ends with."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


# --- Talking to the portal ------------------------------------------------------------------


class Portal:
    """A JSON client of the portal's REST API (/api/v1/) with token authentication."""

    def __init__(self, url: str, token: str, *, timeout: float = TIMEOUT_SECONDS) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        query = urllib.parse.urlencode(params or {}, doseq=True)
        address = f"{self.url}/api/v1/{path}" + (f"?{query}" if query else "")
        request = urllib.request.Request(  # noqa: S310 (the scheme is checked in _settings)
            address,
            headers={
                "Authorization": f"Token {self.token}",
                "Accept": "application/json",
                "User-Agent": f"su-balance/{VERSION}",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                body = response.read()
        except urllib.error.HTTPError as error:
            raise self._refusal(error, path) from None
        except urllib.error.URLError as error:
            raise Failure(
                f"cannot reach the portal at {self.url}: {error.reason}", EXIT_UNREACHABLE
            ) from None
        except (TimeoutError, socket.timeout):  # noqa: UP041 (distinct before Python 3.10)
            raise Failure(
                f"the portal at {self.url} did not answer within {self.timeout:.0f} s",
                EXIT_UNREACHABLE,
            ) from None
        except OSError as error:
            raise Failure(
                f"cannot reach the portal at {self.url}: {error}", EXIT_UNREACHABLE
            ) from None
        try:
            return json.loads(body)
        except ValueError:
            raise Failure(
                f"{address} did not answer with JSON: is SU_PORTAL_URL the portal's address?"
            ) from None

    def pages(self, path: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Every result of a paginated list."""
        results: list[Any] = []
        page = 1
        while True:
            answer = self.get(path, {**(params or {}), "page": page, "page_size": PAGE_SIZE})
            results.extend(answer["results"])
            if not answer.get("next"):
                return results
            page += 1

    def _refusal(self, error: urllib.error.HTTPError, path: str) -> Failure:
        try:
            message = json.loads(error.read()).get("message", "")
        except (ValueError, AttributeError, OSError):
            message = ""
        if error.code == 401:
            # The portal says why (mistyped, expired, revoked) and where to make a new one.
            why = message or (
                f"it may be mistyped, expired or revoked. Make a new one at "
                f"{self.url}/account/tokens/"
            )
            return Failure(
                f"the portal did not accept your token (from SU_PORTAL_TOKEN or {TOKEN_FILE}): "
                f"{why}",
                EXIT_TOKEN,
            )
        if error.code == 404 and path.startswith("projects/"):
            code = path.split("/")[1]
            return Failure(
                f"project {code}: not found, or you are not a member of it", EXIT_NOT_FOUND
            )
        if error.code == 429:
            wait = error.headers.get("Retry-After", "a few")
            return Failure(f"the portal asks to slow down: try again in {wait} seconds")
        return Failure(f"the portal answered {error.code} {error.reason}: {message}".rstrip(": "))


# --- Settings -------------------------------------------------------------------------------


def _settings(environ: Mapping[str, str], stderr: IO[str]) -> tuple[str, str]:
    url = (environ.get("SU_PORTAL_URL") or DEFAULT_URL).strip()
    if not url:
        raise Failure(
            "set SU_PORTAL_URL to the portal's address, e.g. https://portal.example.org",
            EXIT_USAGE,
        )
    if urllib.parse.urlsplit(url).scheme not in {"http", "https"}:
        raise Failure(f"SU_PORTAL_URL must start with https:// or http://, not {url!r}", EXIT_USAGE)
    token = (environ.get("SU_PORTAL_TOKEN") or "").strip()
    if not token:
        home = environ.get("HOME")
        path = Path(TOKEN_FILE.replace("~", home, 1)) if home else Path(TOKEN_FILE).expanduser()
        try:
            token = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise Failure(
                f"no token: set SU_PORTAL_TOKEN or put your token in {TOKEN_FILE} "
                f"(make one at {url.rstrip('/')}/account/tokens/)",
                EXIT_USAGE,
            ) from None
        except OSError as error:
            raise Failure(f"cannot read {path}: {error.strerror}", EXIT_USAGE) from None
        if path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            stderr.write(f"su-balance: warning: others can read {path}; chmod 600 it\n")
        if not token:
            raise Failure(f"{path} is empty: put your token in it", EXIT_USAGE)
    return url, token


# --- What is shown --------------------------------------------------------------------------


def _su(value: Any) -> str:
    """SU as the portal writes them (kit/numbers.py): grouped, rounded half up to the cent
    (two decimals kept here, so the columns line up)."""
    try:
        number = Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    except (InvalidOperation, ValueError):
        return "-"
    return f"{abs(number) if number == 0 else number:,.2f}"


def _signed(value: Any) -> str:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return "-"
    return f"{number:+,.2f}" if number else "0.00"


def _percent(value: Any) -> str:
    return "-" if value is None else f"{Decimal(str(value)):.1f}%"


def _period(balance: Mapping[str, Any]) -> str:
    """First and last day, as the portal's pages show them (the API's ``period_last_day``)."""
    return f"{balance['period_start']} .. {balance['period_last_day']}"


_COLUMNS = (
    ("pool", "<", 14),
    ("budget period", "<", 26),
    ("granted", ">", 12),
    ("adjusted", ">", 10),
    ("used", ">", 12),
    ("remaining", ">", 12),
    ("used %", ">", 7),
    ("running", ">", 10),
    ("reserved", ">", 10),
    ("free", ">", 12),
)


def _row(cells: list[str]) -> str:
    cells = cells + [""] * (len(_COLUMNS) - len(cells))
    return (
        "  "
        + " ".join(
            f"{cell:{align}{width}}"
            for cell, (_, align, width) in zip(cells, _COLUMNS)  # noqa: B905
        ).rstrip()
    )


def _balance_cells(pool: str, balance: Mapping[str, Any], mark: str = "") -> list[str]:
    adjusted = Decimal(str(balance["carried_in_su"])) + Decimal(str(balance["adjustments_su"]))
    return [
        pool,
        _period(balance) + mark,
        _su(balance["budget_su"]),
        _signed(adjusted),
        _su(balance["used_su"]),
        _su(balance["remaining_su"]),
        _percent(balance["percent_used"]),
        _su(balance["pending_su"]),
        _su(balance.get("reserved_su")),
        _su(balance.get("free_su")),
    ]


def _grant_lines(pool: Mapping[str, Any]) -> list[str]:
    """The pool's grants that have not ended (the current one and those still to come)."""
    lines = []
    for grant in pool.get("grants", []):
        if grant["status"] == "ended":
            continue
        lines.append(
            f"    {grant['start']} .. {grant['last_day']}  {grant['status']:<8}"
            f" {_su(grant['granted_su']):>14} granted {_signed(grant['adjustments_su']):>12}"
            f" adjusted {_su(grant['used_su']):>14} used {_su(grant['remaining_su']):>14} left"
        )
    return lines


def render_project(project: Mapping[str, Any], *, year: bool, users: bool) -> list[str]:
    """The lines shown for one project (its balance answer, plus usage per user)."""
    title = f"  {project['title']}" if project.get("title") else ""
    lines = [f"{project['project']}{title}"]
    pools = project["pools"]
    if not pools:
        return [*lines, "  no grant on any pool", ""]
    lines.append(_row([name for name, _, _ in _COLUMNS]))
    notes = []
    for pool in pools:
        current = pool["current"]
        if year and pool["periods"]:
            for balance in pool["periods"]:
                now = current is not None and balance["period_start"] == current["period_start"]
                lines.append(_row(_balance_cells(pool["pool"], balance, " *" if now else "")))
        elif current is not None:
            lines.append(_row(_balance_cells(pool["pool"], current)))
        else:
            lines.append(_row([pool["pool"], "no budget period today"]))
        burning = current is not None and any(
            Decimal(str(current[rate])) for rate in ("burn_rate_7_days", "burn_rate_30_days")
        )
        if current is not None and burning:
            runs_out = current["projected_exhaustion"]
            notes.append(
                f"  burn rate on {pool['pool']}: {_su(current['burn_rate_7_days'])} SU/day over "
                f"7 days, {_su(current['burn_rate_30_days'])} over 30 days; "
                + (f"runs out around {runs_out}" if runs_out else "lasts the period")
            )
    if year:
        lines.append("  (* the current budget period)")
        for pool in pools:
            grants = _grant_lines(pool)
            if grants:
                lines.append(f"  grants on {pool['pool']} (current and future):")
                lines.extend(grants)
    lines.extend(notes)
    for pool in pools:  # the Slurm account to run under, by the portal's naming rule
        for command in pool.get("submit_with", []):
            lines.append(f"  to charge {pool['pool']}: {command}")
    if users:
        for pool in pools:
            current = pool["current"]
            rows = project.get("users", {}).get(pool["pool"], [])
            if current is None:
                continue
            lines.append(f"  usage per user on {pool['pool']}, {_period(current)}:")
            total = sum((Decimal(str(row["service_units"])) for row in rows), Decimal(0))
            if not rows:
                lines.append("    none yet")
            for row in sorted(rows, key=lambda item: -Decimal(str(item["service_units"]))):
                share = Decimal(str(row["service_units"])) * 100 / total if total else Decimal(0)
                lines.append(
                    f"    {row['user']:<16} {_su(row['service_units']):>12} SU {share:6.1f}%"
                    f" {row['jobs']:>8,} job{'' if row['jobs'] == 1 else 's'}"
                )
    if any(pool["current"] and Decimal(str(pool["current"]["pending_su"])) for pool in pools):
        lines.append("  running: SU so far of jobs still running, deducted when they finish")
    if any(
        pool["current"] and Decimal(str(pool["current"].get("reserved_su", 0))) for pool in pools
    ):
        lines.append(
            "  reserved: what queued and running jobs hold at their size and time limit;"
            " free = remaining - reserved"
        )
    return [*lines, ""]


# --- The command ----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="su-balance",
        description="Service Unit balances of your projects, from the SU portal.",
        epilog="Needs SU_PORTAL_URL, and a token in SU_PORTAL_TOKEN or " + TOKEN_FILE + ".",
    )
    parser.add_argument("-p", "--project", help="one project (default: all of yours)")
    parser.add_argument("--users", action="store_true", help="usage per user, too")
    parser.add_argument(
        "--year",
        action="store_true",
        help="every budget period of the grant, not only today's, and the grants still to come",
    )
    parser.add_argument("--json", action="store_true", help="print the portal's data as JSON")
    parser.add_argument("--version", action="version", version=f"su-balance {VERSION}")
    return parser


def collect(portal: Portal, *, project: str | None, year: bool, users: bool) -> list[Any]:
    """The balance answer of each project (one, or all of the caller's)."""
    codes = [project] if project else [item["code"] for item in portal.pages("projects/")]
    found = []
    for code in codes:
        quoted = urllib.parse.quote(code, safe="")
        balance = portal.get(
            f"projects/{quoted}/balance/", {"periods": "all" if year else "current"}
        )
        if users:
            balance["users"] = {}
            for pool in balance["pools"]:
                current = pool["current"]
                if current is None:
                    continue
                balance["users"][pool["pool"]] = portal.pages(
                    "usage/",
                    {
                        "project": code,
                        "pool": pool["pool"],
                        "group_by": "user",
                        "granularity": "total",
                        "start": current["period_start"],
                        "end": current["period_end"],
                    },
                )
        found.append(balance)
    return found


def main(
    argv: list[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run ``su-balance``; returns the exit status."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    options = _parser().parse_args(argv)
    try:
        url, token = _settings(os.environ if environ is None else environ, err)
        balances = collect(
            Portal(url, token), project=options.project, year=options.year, users=options.users
        )
    except Failure as failure:
        err.write(f"su-balance: {failure}\n")
        return failure.status
    if options.json:
        out.write(json.dumps({"projects": balances}, indent=2) + "\n")
        return EXIT_OK
    if not balances:
        out.write("You are not in any project on the portal.\n")
        return EXIT_OK
    for balance in balances:
        out.write("\n".join(render_project(balance, year=options.year, users=options.users)))
        out.write("\n")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
