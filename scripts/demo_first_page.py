"""How long `make demo` takes on a fresh clone to answer its first page, phase by phase
(docs/development.md, "The first minutes").

    python scripts/demo_first_page.py SOURCE DEST PORT [COMMIT]

clones SOURCE (a path or URL) into DEST (removed first), checks out COMMIT if given, runs
`make demo PORT=...` in its own process group without pip's cache, stamps each phase by the
command lines make prints, polls `/` every 0.2 s and stops the demo at its first 200.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

# A phase ends when make prints the command of the next one.
PHASES = (
    ("manage.py migrate", "install (venv, pip)"),
    ("manage.py loaddemo", "migrate"),
    ("manage.py collectstatic", "loaddemo"),
    ("Serving on", "collectstatic (or loaddemo before it existed)"),
)


def main(source: str, dest: str, port: str, commit: str | None) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    began = time.monotonic()
    subprocess.run(["git", "clone", "-q", source, dest], check=True)
    if commit:
        subprocess.run(["git", "checkout", "-q", commit], cwd=dest, check=True)
    marks = [("clone", time.monotonic() - began)]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env["PIP_NO_CACHE_DIR"] = "1"
    demo = subprocess.Popen(
        ["make", "demo", f"PORT={port}"], cwd=dest, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip

    def stamp() -> None:
        assert demo.stdout is not None
        for line in demo.stdout:
            for command, phase in PHASES:
                if command in line and phase not in dict(marks):
                    marks.append((phase, time.monotonic() - began))

    threading.Thread(target=stamp, daemon=True).start()
    while demo.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as answer:
                if answer.status == 200:
                    marks.append(("runserver to first page", time.monotonic() - began))
                    break
        except OSError:
            pass
        time.sleep(0.2)
    else:
        marks.append(("make demo exited", time.monotonic() - began))
    os.killpg(demo.pid, signal.SIGTERM)
    demo.wait(timeout=30)
    previous = 0.0
    for phase, at in marks:
        print(f"{phase:48s} {at - previous:6.1f} s  (total {at:6.1f} s)")
        previous = at


if __name__ == "__main__":
    if len(sys.argv) not in {4, 5}:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) == 5 else None)
