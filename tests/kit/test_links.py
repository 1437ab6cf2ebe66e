"""kit.links: ``{% url %}`` reversed once per process, and never differently from Django."""

from __future__ import annotations

import pytest
from django.template import Context, Template
from django.test import override_settings
from django.urls import NoReverseMatch, path, reverse, set_script_prefix

from kit import links
from projects.models import Project


def _view(request):  # pragma: no cover - only reversed, never called
    raise AssertionError


urlpatterns = [path("elsewhere/<str:code>/", _view, name="project-detail-elsewhere")]


@pytest.fixture(autouse=True)
def _empty_cache():
    links._kept.cache_clear()
    yield
    links._kept.cache_clear()
    set_script_prefix("/")


def test_a_plain_reversal_is_django_s_and_is_kept():
    expected = reverse("allocations:project-detail", args=["abc1"])

    assert links.reversed_url("allocations:project-detail", args=["abc1"]) == expected
    assert links.reversed_url("allocations:project-detail", args=["abc1"]) == expected
    info = links._kept.cache_info()
    assert (info.hits, info.misses) == (1, 1)
    assert links.reversed_url("home") == reverse("home")


def test_keyword_arguments_in_any_order_are_one_entry():
    expected = reverse("allocations:project-detail", kwargs={"code": "abc1"})
    assert links.reversed_url("allocations:project-detail", kwargs={"code": "abc1"}) == expected
    assert links._kept.cache_info().currsize == 1


def test_a_model_instance_argument_is_reversed_every_time_not_kept():
    project = Project(pk=7, code="abc1")
    expected = reverse("allocations:project-detail", args=[project])

    assert links.reversed_url("allocations:project-detail", args=[project]) == expected
    assert links._kept.cache_info().currsize == 0


def test_a_name_that_does_not_reverse_raises_every_time():
    for _ in range(2):
        with pytest.raises(NoReverseMatch):
            links.reversed_url("no-such-view")
    assert links._kept.cache_info().currsize == 0


def test_the_script_prefix_is_part_of_the_answer():
    plain = links.reversed_url("home")
    set_script_prefix("/portal/")
    assert links.reversed_url("home") == "/portal" + plain == reverse("home")


def test_another_urlconf_is_another_answer():
    with override_settings(ROOT_URLCONF=__name__):
        assert links.reversed_url("project-detail-elsewhere", args=["x"]) == "/elsewhere/x/"
        with pytest.raises(NoReverseMatch):
            links.reversed_url("home")
    assert links.reversed_url("home") == reverse("home")


def test_the_url_tag_renders_what_django_s_renders():
    template = Template(
        "{% url 'allocations:project-detail' code %}|{% url 'no-such-view' as missing %}"
        "[{{ missing }}]|{% url 'allocations:project-detail' project %}|{% url 'home' %}"
    )
    project = Project(pk=3, code="q&a")
    text = template.render(Context({"code": "a b&c", "project": project}))

    escaped = reverse("allocations:project-detail", args=["a b&c"]).replace("&", "&amp;")
    instance = reverse("allocations:project-detail", args=[project]).replace("&", "&amp;")
    assert text == f"{escaped}|[]|{instance}|{reverse('home')}"
    assert isinstance(template.nodelist[0], links.CachedURLNode)


def test_an_unknown_name_in_the_tag_raises_as_django_s_does():
    with pytest.raises(NoReverseMatch):
        Template("{% url 'no-such-view' %}").render(Context({}))
