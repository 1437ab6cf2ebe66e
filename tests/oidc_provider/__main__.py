"""``python -m tests.oidc_provider STATE_DIR CLIENT_SECRET REDIRECT_URI...``: serve the test
identity provider on a free loopback port; prints ``LISTENING <url>`` once it answers."""

from __future__ import annotations

import os
import sys
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

CLIENT_ID = "su-portal"
PASSWORD = "centre-pw-for-tests"
# username: (first name, last name, groups at the centre)
DIRECTORY = {
    "rita": ("Rita", "Researcher", []),
    "sam": ("Sam", "Staff", ["hpc-staff"]),
    "cleo": ("Cleo", "Committee", ["allocation-committee", "astronomy"]),
}


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _seed(client_secret: str, redirect_uris: list[str]) -> None:
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oidc_provider.models import Client, ResponseType

    call_command("migrate", verbosity=0)
    call_command("creatersakey", stdout=open(os.devnull, "w"))  # noqa: SIM115
    for username, (first, last, groups) in DIRECTORY.items():
        user = User.objects.create_user(
            username, f"{username}@centre.example", PASSWORD, first_name=first, last_name=last
        )
        for name in groups:
            user.groups.add(Group.objects.get_or_create(name=name)[0])
    client = Client.objects.create(
        name="SU portal", client_type="confidential", client_id=CLIENT_ID,
        client_secret=client_secret, redirect_uris=redirect_uris, require_consent=False,
        jwt_alg="RS256",
    )  # fmt: skip
    client.response_types.add(ResponseType.objects.get(value="code"))


def main(argv: list[str]) -> None:
    state_dir, client_secret, *redirect_uris = argv
    server = make_server("127.0.0.1", 0, lambda e, s: [], _Server, _QuietHandler)
    url = f"http://127.0.0.1:{server.server_port}"
    os.environ["IDP_STATE_DIR"] = state_dir
    os.environ["IDP_SITE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_provider.settings"
    import django
    from django.core.wsgi import get_wsgi_application

    django.setup()
    _seed(client_secret, redirect_uris)
    server.set_app(get_wsgi_application())
    print("LISTENING", url, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
