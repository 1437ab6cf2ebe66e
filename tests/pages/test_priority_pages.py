"""The staff page of dynamic priority: the policy form, Figure 2 with each project on the
curve, the projects' priorities and commands, posting K_prof one by one or as CSV."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import plotly.graph_objects as go
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from accounting.models import Job
from allocations.models import PriorityAction, PriorityPolicy, ProfilingCoefficient
from allocations.priorities.services import priority_policy_set, profiling_coefficient_post
from tests.allocations.conftest import SAMPLE, centre  # noqa: F401 (pytest fixture)

pytestmark = pytest.mark.django_db

PAGE = "/allocations/priorities/"
FIGURE = re.compile(r'<script type="application/json" id="chart-priority-data">(.*?)</script>')
POLICY = {"base_priority": "1000", "k1": "0.4", "k2": "0.7", "c0": "0.5", "c1": "1", "c2": "3"}


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def staff(centre):  # noqa: F811 (the imported fixture)
    return login(centre.staff)


def with_policy(centre, **changes):  # noqa: F811
    priority_policy_set(cluster=centre.cluster, updated_by=centre.staff, **{**POLICY, **changes})


def post_k(centre, project, k):  # noqa: F811
    profiling_coefficient_post(
        cluster=centre.cluster, project=project, k_prof=k, posted_by=centre.staff
    )


def test_the_page_and_its_forms_are_for_staff_only(centre):  # noqa: F811
    urls = [
        ("get", PAGE),
        ("post", reverse("allocations:priority-policy", args=["slurm-testbed"])),
        ("post", reverse("allocations:priority-coefficient", args=["slurm-testbed"])),
        ("post", reverse("allocations:priority-upload", args=["slurm-testbed"])),
        ("post", reverse("allocations:priority-propose", args=["slurm-testbed"])),
    ]
    researcher = login(centre.alice)
    for method, url in urls:
        assert getattr(researcher, method)(url, POLICY).status_code == 404, url
        anonymous = getattr(Client(), method)(url, POLICY)
        assert anonymous.status_code == 302
        assert anonymous["Location"].startswith(reverse("login"))
    assert not PriorityPolicy.objects.exists()
    assert "Priorities" not in researcher.get("/").content.decode()


def test_without_a_policy_the_page_asks_for_one_and_draws_no_chart(centre, staff):  # noqa: F811
    page = staff.get(PAGE)
    assert page.status_code == 200
    text = page.content.decode()
    assert "slurm-testbed has no priority policy yet" in text
    assert "chart-priority" not in text
    assert f'href="{PAGE}"' in text  # the staff nav link


def test_staff_set_the_policy_with_the_form(centre, staff):  # noqa: F811
    url = reverse("allocations:priority-policy", args=["slurm-testbed"])
    response = staff.post(url, {**POLICY, "command_template": "echo {qos} {priority}"})
    assert response.status_code == 302
    policy = PriorityPolicy.objects.get(cluster=centre.cluster)
    assert (policy.k2, policy.command_template, policy.execution_enabled) == (
        Decimal(POLICY["k2"]), "echo {qos} {priority}", False,
    )  # fmt: skip
    assert (
        "Priority policy of slurm-testbed saved."
        in staff.get(response["Location"]).content.decode()
    )


def test_a_policy_with_k1_not_below_k2_is_shown_with_its_error(centre, staff):  # noqa: F811
    url = reverse("allocations:priority-policy", args=["slurm-testbed"])
    page = staff.post(url, {**POLICY, "k1": "0.8", "command_template": "x {priority}"})
    assert page.status_code == 200
    assert "the thresholds must satisfy K1 &lt; K2, got K1=0.8 and K2=0.7" in page.content.decode()
    assert not PriorityPolicy.objects.exists()
    page = staff.post(url, {**POLICY, "command_template": "x {qos}"})
    assert "must use {priority}" in page.content.decode()


def test_figure_2_is_the_curve_with_k1_k2_marked_and_each_project_on_it(centre, staff):  # noqa: F811
    with_policy(centre)
    post_k(centre, centre.p1, "0.2")
    post_k(centre, centre.p3, "0.9")
    text = staff.get(PAGE).content.decode()
    (data,) = FIGURE.findall(text)
    figure = go.Figure(json.loads(data))  # raises on any property plotly does not know
    assert figure.layout.title.text == "Dynamic priority against the profiling coefficient"
    assert figure.layout.xaxis.title.text == "profiling coefficient K"
    assert figure.layout.yaxis.title.text == "dynamic priority Pr_dyn"
    assert all(trace.hovertemplate for trace in figure.data)
    curve, points = figure.data
    # The corners of the piecewise-linear curve are at K1 and K2, Pr_base at K1.
    corners = dict(zip(curve.x, curve.y, strict=True))
    assert corners[0.4] == 1000
    assert corners[0.7] == 1300
    assert [shape.x0 for shape in figure.layout.shapes] == [0.4, 0.7]
    assert list(points.text) == ["pawsey0001", "pawsey0003"]
    assert list(points.x) == [0.2, 0.9]
    assert list(points.y) == [900, 1900]
    assert "cdn.plot.ly" not in text
    assert "vendor/plotly/plotly-finance.min.js" in text
    csv = staff.get(PAGE + "?cluster=slurm-testbed&csv=priority")
    assert csv["Content-Type"].startswith("text/csv")
    assert "pawsey0003,0.900000,1900.000000" in csv.content.decode()


def test_the_table_lists_k_pr_dyn_and_the_command(centre, staff):  # noqa: F811
    with_policy(centre)
    post_k(centre, centre.p3, "0.55")
    text = staff.get(PAGE).content.decode()
    assert "sacctmgr --immediate modify qos pawsey0003 set priority=1150" in text
    assert ">0.55<" in text
    assert ">1150<" in text
    assert "project value" in text


def test_staff_post_k_prof_for_a_project_or_a_job(centre, staff):  # noqa: F811
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        from accounting.ledger.pipeline import jobs_import

        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    job = Job.objects.filter(project=centre.p3, run="").order_by("pk").first()
    assert job is not None
    url = reverse("allocations:priority-coefficient", args=["slurm-testbed"])
    assert staff.post(url, {"project": "pawsey0001", "k_prof": "0.3"}).status_code == 302
    response = staff.post(url, {"project": "pawsey0003", "k_prof": "0.6", "job_id": job.job_id_raw})
    assert response.status_code == 302
    assert ProfilingCoefficient.objects.get(project=centre.p3).job == job
    page = staff.post(url, {"project": "pawsey0001", "k_prof": "0.6", "job_id": job.job_id_raw})
    assert "is not a job of project pawsey0001" in page.content.decode()
    page = staff.post(url, {"project": "pawsey0001", "k_prof": "0.6", "job_id": "12345678"})
    assert "no job with id 12345678 on slurm-testbed" in page.content.decode()
    page = staff.post(url, {"project": "pawsey0001", "k_prof": "-1"})
    assert "greater than or equal to 0" in page.content.decode()
    assert ProfilingCoefficient.objects.count() == 2
    assert all(item.source == "form" for item in ProfilingCoefficient.objects.all())


def test_a_csv_upload_with_errors_lists_them_by_line_and_imports_nothing(centre, staff):  # noqa: F811
    url = reverse("allocations:priority-upload", args=["slurm-testbed"])
    content = b"project,k_prof\npawsey0001,0.3\npawsey0002,x\nnosuch,1\n"
    page = staff.post(url, {"file": SimpleUploadedFile("k.csv", content)})
    assert page.status_code == 200
    text = page.content.decode()
    assert "nothing was imported: 2 problem(s) below" in text
    table = text[text.index('id="csv-errors"') :]
    rows = re.findall(
        r"<tr><td class=\"num\">(\d+)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", table
    )
    assert rows == [
        ("3", "k_prof", "K_prof must be a decimal number, got &#x27;x&#x27;"),
        ("4", "project", "unknown project &#x27;nosuch&#x27;"),
    ]
    assert not ProfilingCoefficient.objects.exists()


def test_a_good_csv_upload_is_imported(centre, staff):  # noqa: F811
    url = reverse("allocations:priority-upload", args=["slurm-testbed"])
    content = "\ufeffproject,k_prof,note\npawsey0001,0.3,first\npawsey0002,0.9,\n".encode()
    response = staff.post(url, {"file": SimpleUploadedFile("k.csv", content)})
    assert response.status_code == 302
    assert ProfilingCoefficient.objects.filter(source="csv").count() == 2
    assert "2 coefficient(s) imported." in staff.get(response["Location"]).content.decode()


def test_a_file_that_is_not_utf8_is_refused(centre, staff):  # noqa: F811
    url = reverse("allocations:priority-upload", args=["slurm-testbed"])
    page = staff.post(url, {"file": SimpleUploadedFile("k.csv", b"project,k_prof\n\xff\xfe,1\n")})
    assert "the file is not UTF-8 text" in page.content.decode()


def test_proposals_wait_for_review_and_run_only_when_execution_is_enabled(centre, staff):  # noqa: F811
    with_policy(centre, command_template="echo {account} {priority}")
    post_k(centre, centre.p1, "0.2")
    response = staff.post(reverse("allocations:priority-propose", args=["slurm-testbed"]))
    assert response.status_code == 302
    action = PriorityAction.objects.get()
    text = staff.get(PAGE).content.decode()
    assert "echo pawsey0001 900" in text
    assert 'value="run"' not in text  # no Run button while execution is not enabled
    decide = reverse("allocations:priority-action-decide", args=[action.pk])
    refused = staff.post(decide, {"decision": "run"}, follow=True)
    assert "execution is not enabled" in refused.content.decode()
    action.refresh_from_db()
    assert action.status == "proposed"

    with_policy(centre, command_template="echo {account} {priority}", execution_enabled=True)
    assert 'value="run"' in staff.get(PAGE).content.decode()
    ran = staff.post(decide, {"decision": "run"}, follow=True)
    assert "echo pawsey0001 900: executed (exit 0)" in ran.content.decode()
    action.refresh_from_db()
    assert (action.status, action.output, action.reviewed_by) == (
        "executed", "pawsey0001 900\n", centre.staff,
    )  # fmt: skip


def test_staff_dismiss_a_proposal(centre, staff):  # noqa: F811
    with_policy(centre)
    post_k(centre, centre.p1, "0.2")
    staff.post(reverse("allocations:priority-propose", args=["slurm-testbed"]))
    action = PriorityAction.objects.get()
    decide = reverse("allocations:priority-action-decide", args=[action.pk])
    page = staff.post(decide, {"decision": "dismiss"}, follow=True)
    assert "Dismissed: sacctmgr" in page.content.decode()
    action.refresh_from_db()
    assert action.status == "dismissed"
    assert login(centre.alice).post(decide, {"decision": "run"}).status_code == 404


def test_proposing_without_a_policy_says_so(centre, staff):  # noqa: F811
    page = staff.post(reverse("allocations:priority-propose", args=["slurm-testbed"]), follow=True)
    assert "has no priority policy; set one first" in page.content.decode()


def test_an_unknown_cluster_is_404(centre, staff):  # noqa: F811
    assert staff.get(PAGE + "?cluster=nowhere").status_code == 404


def test_the_admin_lists_the_three_priority_models(centre):  # noqa: F811
    from tests.factories import UserFactory

    with_policy(centre)
    post_k(centre, centre.p1, "0.2")
    admin = login(UserFactory(username="root-admin", is_staff=True, is_superuser=True))
    for model in ("prioritypolicy", "profilingcoefficient", "priorityaction"):
        assert admin.get(reverse(f"admin:allocations_{model}_changelist")).status_code == 200


def test_the_policy_form_shows_the_current_policy_as_written(centre, staff):  # noqa: F811
    with_policy(centre)
    text = staff.get(PAGE).content.decode()
    assert 'name="k1" value="0.4"' in text
    assert 'name="base_priority" value="1000"' in text
