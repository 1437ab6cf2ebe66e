"""Render deploy/nginx.conf.template for a native run and start nginx on it (scripts/nginx-proxy,
``make run-nginx``). docker-compose.yml renders the same template with the official image's
envsubst; :func:`render` substitutes the same way, so both get the same configuration.

No Django here: nginx starts before, and apart from, the portal's processes.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "deploy" / "nginx.conf.template"
# gunicorn's timeout (deploy/gunicorn.conf.py reads the same variable with the same default).
WEB_TIMEOUT_SECONDS = 120
_PLACEHOLDER = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")
# envsubst also replaces $NAME without braces; the template must not have any.
_UNBRACED = re.compile(r"\$[A-Z][A-Z0-9_]*")


class RenderError(Exception):
    """The template names a placeholder no value was given for, or uses one unbraced."""


def render(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``${NAME}`` replaced by ``values[NAME]``: what the nginx image's
    envsubst makes of it given exactly these variables, except that a missing one fails here
    instead of leaving a broken line."""
    unbraced = sorted(set(_UNBRACED.findall(template)))
    if unbraced:
        raise RenderError(f"write placeholders as ${{NAME}}, not {', '.join(unbraced)}")
    missing = sorted(set(_PLACEHOLDER.findall(template)) - values.keys())
    if missing:
        raise RenderError(f"no value for {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


def native_values(
    *, listen: str, var_dir: Path, static_root: Path | None = None, user: str | None = None
) -> dict[str, str]:
    """The template's values for a native run: gunicorn on a unix socket in ``var_dir`` (where
    ``make run-web`` binds it), nginx's pid and temporary files there too. Unprivileged nginx
    workers run as the invoking user, or as www-data when that is root."""
    if user is None:
        user = "www-data" if os.geteuid() == 0 else getpass.getuser()
    return {
        "NGINX_USER": user,
        "NGINX_LISTEN": listen,
        "NGINX_PID_FILE": str(var_dir / "nginx" / "nginx.pid"),
        "NGINX_TEMP_DIR": str(var_dir / "nginx"),
        "PORTAL_UPSTREAM": f"unix:{gunicorn_socket(var_dir)}",
        "PORTAL_STATIC_ROOT": str(static_root or var_dir / "static"),
        "PORTAL_WEB_TIMEOUT": os.environ.get("PORTAL_WEB_TIMEOUT") or str(WEB_TIMEOUT_SECONDS),
    }


def gunicorn_socket(var_dir: Path) -> Path:
    """Where a native gunicorn listens (``make run-web``)."""
    return var_dir / "run" / "gunicorn.sock"


def write_config(values: Mapping[str, str], path: Path) -> Path:
    """Render the template with ``values`` into ``path`` and make nginx's temporary directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Path(values["NGINX_TEMP_DIR"]).mkdir(parents=True, exist_ok=True)
    path.write_text(render(TEMPLATE.read_text(), values))
    return path


def nginx_binary() -> str:
    """Debian's nginx (nginx-light or nginx; scripts/nginx-proxy installs it when missing)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise SystemExit("nginx is missing: run scripts/nginx-proxy install (Debian: nginx-light)")
    return found


def nginx_command(config: Path) -> list[str]:
    """nginx in the foreground on ``config``, its start-up errors on stderr."""
    return [nginx_binary(), "-c", str(config), "-e", "stderr", "-g", "daemon off;"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/nginx-proxy", description="nginx in front of gunicorn, natively."
    )
    parser.add_argument("command", choices=["render", "run"])
    parser.add_argument("--listen", default="127.0.0.1:8000", help="HOST:PORT nginx serves on")
    arguments = parser.parse_args(argv)
    var_dir = Path(os.environ.get("PORTAL_VAR_DIR") or ROOT / "var").resolve()
    static_root = os.environ.get("DJANGO_STATIC_ROOT")
    values = native_values(
        listen=arguments.listen,
        var_dir=var_dir,
        static_root=Path(static_root) if static_root else None,
    )
    config = write_config(values, var_dir / "nginx" / "nginx.conf")
    if arguments.command == "render":
        print(config)
        return 0
    command = nginx_command(config)
    print(f"nginx on http://{arguments.listen}/ in front of {values['PORTAL_UPSTREAM']}")
    sys.stdout.flush()
    os.execv(command[0], command)  # noqa: S606 (nginx replaces this process, as exec in sh)


if __name__ == "__main__":
    sys.exit(main())
