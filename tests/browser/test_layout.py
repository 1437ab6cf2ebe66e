"""Layout at a phone's width and on a laptop (issue 16, item 10): a researcher's tables show
their SU column without scrolling, the menu wraps instead of scrolling sideways, and staff
get their menu on one row at 1400 px."""

from __future__ import annotations

import pytest

from accounting.costs.services import cost_model_version_create
from accounting.models import Job
from tests.browser.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}

# Each table's cells that stick out of the visible part of its box (scrolled off-screen).
CUT_OFF_CELLS = """table => {
  const box = table.closest('.table-wrap') || table.parentElement;
  const right = Math.min(box.getBoundingClientRect().right, window.innerWidth);
  return [...table.querySelectorAll('thead th')]
    .filter(cell => cell.offsetParent !== null && cell.getBoundingClientRect().right > right + 1)
    .map(cell => cell.innerText.trim());
}"""
# The menu's links that are not wholly inside the window, or that need a sideways scroll.
MENU_LINKS_CUT = """() => [...document.querySelectorAll('header nav a, header nav summary')]
  .filter(link => link.offsetParent !== null)
  .filter(link => {
    const box = link.getBoundingClientRect();
    return box.left < 0 || box.right > window.innerWidth;
  }).map(link => link.innerText.trim())"""
# How far apart, in pixels, the vertical centres of the top bar's items are (one row: a few).
MENU_SPREAD = """() => {
  const centres = [...document.querySelectorAll(
    'header .brand, header nav > a, header nav > details > summary, header .account > *')]
    .filter(item => item.offsetParent !== null)
    .map(item => { const box = item.getBoundingClientRect(); return box.top + box.height / 2; });
  return Math.max(...centres) - Math.min(...centres);
}"""


def test_on_a_phone_the_jobs_table_shows_the_su_column(live_server, scenario, sign_in):
    page = sign_in("alice", **PHONE)
    page.goto(f"{live_server.url}/accounting/projects/pawsey0001/jobs/")
    assert page.locator("#jobs").evaluate(CUT_OFF_CELLS) == []
    assert page.locator("#jobs thead th", has_text="SU").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_on_a_phone_a_researchers_tables_fit_the_screen(live_server, scenario, sign_in):
    # Money beside SU: the demo's cost model of the cluster, priced.
    cost_model_version_create(
        cluster=scenario.cluster, name="demo",
        text=(ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text(),
    )  # fmt: skip
    page = sign_in("alice", **PHONE)
    project = scenario.projects["pawsey0001"]
    gpu_job = Job.objects.filter(project=project, partition__name="gpu", charge_state="charged")
    cpu_job = Job.objects.filter(project=project, partition__name="work", charge_state="charged")
    for path in ("/", f"/allocations/projects/{project.code}/", "/allocations/rounds/",
                 f"/allocations/requests/{scenario.requests[project.code].pk}/",
                 f"/accounting/jobs/{gpu_job.order_by('-gpus', 'pk').first().pk}/",
                 f"/accounting/jobs/{cpu_job.order_by('pk').first().pk}/",
                 f"/accounting/projects/{project.code}/energy/"):  # fmt: skip
        page.goto(live_server.url + path)
        for table in page.locator("table.data").all():
            if table.is_visible():
                assert table.evaluate(CUT_OFF_CELLS) == [], path
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], path


@pytest.mark.parametrize("username", ["alice", "staff"])
def test_on_a_phone_the_menu_wraps_and_cuts_no_item(live_server, scenario, sign_in, username):
    page = sign_in(username, **PHONE)
    nav = page.locator("header nav")
    assert nav.evaluate("nav => nav.scrollWidth <= nav.clientWidth")
    assert page.evaluate(MENU_LINKS_CUT) == []
    if username == "staff":  # the staff pages are one tap away and fit once opened
        page.locator("header nav summary", has_text="Staff").click()
        page.locator("header nav a", has_text="Utilisation").wait_for()
        assert page.evaluate(MENU_LINKS_CUT) == []


def test_at_1400_px_the_staff_menu_is_one_row(live_server, scenario, sign_in):
    page = sign_in("staff", width=1400, height=900)
    assert page.evaluate(MENU_SPREAD) < 10
    page.locator("header nav summary", has_text="Staff").click()
    page.locator("header nav a", has_text="Audit log").click()
    page.wait_for_url(f"{live_server.url}/audit/")
    assert page.locator("header nav summary.active", has_text="Staff").count() == 1


# The top of each form control and button of a form's first row, and of each stat's value in
# a row of stats: what should stand level, by what it is (to say what is out of line).
FIRST_ROW_TOPS = """form => {
  const controls = [...form.querySelectorAll(
    '.form-grid > .field > input, .form-grid > .field > select, .form-grid > .buttons > *')];
  const cell = control => control.closest('.form-grid > *').getBoundingClientRect();
  // the first row's cells begin above where the shortest of them ends
  const end = Math.min(...controls.map(control => cell(control).bottom));
  return controls.filter(control => cell(control).top < end)
    .map(control => [control.name || control.innerText.trim(),
                     Math.round(control.getBoundingClientRect().top
                                + control.getBoundingClientRect().height / 2)]);
}"""
STAT_VALUE_TOPS = """stats => [...stats.querySelectorAll(':scope > .stat')]
  .filter(stat => Math.abs(stat.getBoundingClientRect().top
                           - stats.firstElementChild.getBoundingClientRect().top) < 2)
  .map(stat => [stat.querySelector('.label').innerText,
                Math.round(stat.querySelector('.value').getBoundingClientRect().top)])"""


def test_a_forms_fields_and_buttons_stand_level_whatever_help_hangs_below(
    live_server, scenario, sign_in
):
    # The jobs filter: the job field's help (three lines) lifted it above its row's others;
    # the window of the utilisation page: its buttons stood below the fields' inputs.
    page = sign_in("staff", width=1280, height=800)
    for path, form in (("/accounting/projects/pawsey0001/jobs/", "Filter jobs"),
                       ("/accounting/utilisation/", "Choose the window")):  # fmt: skip
        page.goto(live_server.url + path)
        centres = page.locator(f"form[aria-label='{form}']").evaluate(FIRST_ROW_TOPS)
        assert len(centres) >= 3, centres
        assert max(y for _, y in centres) - min(y for _, y in centres) <= 2, (path, centres)


def test_a_stats_values_stand_level_when_a_label_takes_two_lines(live_server, scenario, sign_in):
    # The dashboard's "last day of the period" wraps in a laptop's half-width card: its date
    # stood a line below the other figures of the row.
    page = sign_in("alice", width=1280, height=800)
    page.goto(live_server.url + "/")
    rows = page.locator(".stats").all()
    assert rows
    for stats in rows:
        tops = stats.evaluate(STAT_VALUE_TOPS)
        assert max(y for _, y in tops) - min(y for _, y in tops) <= 1, tops


def test_on_a_phone_every_tab_of_a_project_shows_without_scrolling(live_server, scenario, sign_in):
    # The project's tabs scrolled sideways: a phone showed "Efficie" and hid "Audit log".
    page = sign_in("alice", **PHONE)
    page.goto(f"{live_server.url}/allocations/projects/pawsey0001/")
    tabs = page.locator("nav.tabs a")
    assert tabs.count() >= 5
    cut = page.evaluate("""() => [...document.querySelectorAll('nav.tabs a')].filter(tab => {
        const box = tab.getBoundingClientRect(), nav = tab.parentElement.getBoundingClientRect();
        return box.left < nav.left || box.right > nav.right;
      }).map(tab => tab.innerText)""")
    assert cut == []
