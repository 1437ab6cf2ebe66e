"""Every mail links to PORTAL_URL, the one source of the portal's address in mail (a mail sent
by a task has no request to take it from): no link to another host or port, whether the mail
is sent by a task or during a request that named another Host (docs/configuration.md, "Links in
mails"). Every template of a mail lives in a ``mail/`` template directory; the first test
renders each one it finds there, so a new mail template is checked without a new test."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core import mail
from django.template.loader import render_to_string
from django.template.utils import get_app_template_dirs
from django.test import override_settings
from django.urls import reverse

from people.pages import PasswordResetThrottled
from projects.invitations import invitation_send
from tests.factories import ProjectFactory, UserFactory

PORTAL = "http://portal.example.org:8123"
# Any absolute URL, bare or in an attribute, and any href/src value (relative ones too: a link
# in a mail must be absolute, to the portal).
URL = re.compile(r"""(?:[a-z][a-z0-9+.-]*:)?//[^\s"'<>]+""", re.IGNORECASE)
ATTRIBUTE = re.compile(r"""(?:href|src)\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)


def _template_dirs() -> list[Path]:
    """The portal's own template directories (not those of installed packages)."""
    engines: list[dict[str, Any]] = settings.TEMPLATES
    dirs = [Path(d) for engine in engines for d in engine.get("DIRS", [])]
    dirs += [Path(d) for d in get_app_template_dirs("templates")]
    return [
        d
        for d in dirs
        if d.resolve().is_relative_to(Path(settings.BASE_DIR).resolve())
        and not d.resolve().is_relative_to(Path(sys.prefix).resolve())
        and "site-packages" not in d.parts
    ]


def _mail_templates() -> list[str]:
    return sorted(
        path.relative_to(directory).as_posix()
        for directory in _template_dirs()
        for path in (directory / "mail").rglob("*")
        if path.is_file()
    )


def _foreign_links(text: str) -> list[str]:
    """The links in ``text`` that do not go to the portal at PORTAL."""
    links = [match.group(0) for match in URL.finditer(text)]
    links += [match.group(1) for match in ATTRIBUTE.finditer(text)]
    return [link for link in links if link != PORTAL and not link.startswith(PORTAL + "/")]


def test_the_link_check_catches_another_host_a_port_and_a_relative_href():
    assert _foreign_links(f"{PORTAL}/x/ and {PORTAL}") == []
    assert _foreign_links("see http://127.0.0.1:8000/x/") == ["http://127.0.0.1:8000/x/"]
    assert _foreign_links("http://portal.example.org:8000/") == ["http://portal.example.org:8000/"]
    assert _foreign_links('<a href="/relative/">x</a>') == ["/relative/"]


@pytest.mark.django_db
@override_settings(PORTAL_URL=PORTAL + "/")
def test_every_mail_template_renders_links_to_portal_url_only():
    names = _mail_templates()
    # The frame of every notification and the password reset mail, at least.
    assert {"mail/notification.txt", "mail/password_reset.txt"} <= set(names)
    user = UserFactory.create(username="amy")
    # What a template might be given; a template that takes the request's host or Django's
    # default domain (protocol://domain) would link elsewhere, and is caught.
    context = {
        "body": "Your allocation was granted.",
        "link": PORTAL + reverse("home"),
        "portal_url": PORTAL,
        "protocol": "https",
        "domain": "elsewhere.example.net:9999",
        "site_name": "elsewhere.example.net:9999",
        "uid": "MQ",
        "token": "c5z-0123456789abcdef",
        "user": user,
        "email": user.email,
    }
    for name in names:
        text = render_to_string(name, context)
        assert text.strip(), name
        assert _foreign_links(text) == [], name


def test_no_mail_template_lives_outside_a_mail_directory():
    """So the test above sees them all: the portal's password reset mail is its own, not
    Django's (which links to the Host of the request)."""
    assert PasswordResetThrottled.email_template_name.startswith("mail/")
    assert PasswordResetThrottled.subject_template_name.startswith("mail/")
    stray = [
        str(path)
        for directory in _template_dirs()
        for path in directory.rglob("*")
        if path.is_file()
        and re.search(r"e-?mail|subject", path.name, re.IGNORECASE)
        and "mail" not in path.relative_to(directory).parts[:-1]
    ]
    assert stray == []


@pytest.mark.django_db
@override_settings(PORTAL_URL=PORTAL, ALLOWED_HOSTS=["elsewhere.example.net"])
def test_a_mail_sent_during_a_request_links_to_portal_url_not_the_host_the_request_named(
    client,
):
    user = UserFactory.create(email="amy@example.org")
    user.set_password("old-password-1")
    user.save()

    response = client.post(
        reverse("password_reset"), {"email": user.email}, HTTP_HOST="elsewhere.example.net:9999"
    )

    assert response.status_code == 302
    (sent,) = mail.outbox
    assert sent.subject == "[SU portal] Reset your password"
    assert f"{PORTAL}/accounts/reset/" in sent.body
    assert _foreign_links(sent.body) == []


@pytest.mark.django_db
@override_settings(PORTAL_URL=PORTAL)
def test_a_notification_links_to_portal_url_in_its_link_and_its_footer(
    django_capture_on_commit_callbacks,
):
    project = ProjectFactory.create(code="mail0001")
    assert project.pi is not None

    with django_capture_on_commit_callbacks(execute=True):
        sent = invitation_send(
            project=project, email="new@example.org", role="member", actor=project.pi
        )

    (message,) = mail.outbox
    assert sent.link.startswith(f"{PORTAL}/allocations/")
    assert sent.link in message.body
    assert f"{PORTAL}/account/notifications/" in message.body
    assert _foreign_links(message.body) == []
