"""Cost models attached to clusters: versions, money per job in the import, the roll-ups'
money, and the recomputation after a new version (accounting/costs/services.py, DESIGN section
6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum

from accounting.clusters.charging import node_share_even
from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.costs.costmodels import cost_model_parse, expand_nodelist, job_cost
from accounting.costs.services import (
    BEGINNING,
    CostModelRejected,
    JobPricer,
    JobShape,
    cost_model_at,
    cost_model_version_create,
    cost_table_get,
    job_cost_get,
    job_costs_recompute,
    stored_cost,
)
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, CostModelVersion, Job, UsageDaily
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
DEMO_MODEL = (ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text()
ENERGY_FIELD = 20  # ConsumedEnergyRaw in the generator's layout

MODEL = """\
currency Euro
nodes CPU nid[1001-1004]
rate Hardware 6 k/a
rate Staff 2.5 k/a
energy-rate Power 0.25 1/kWh
nodes GPU nid[2001-2002]
rate Hardware 24 k/a
energy-rate Power 0.25 1/kWh
"""
DEARER = MODEL.replace("rate Hardware 6 k/a", "rate Hardware 9 k/a")
SHARED = "nodes-are shared\n" + MODEL

pytestmark = pytest.mark.django_db


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.create(code=code, title=code)
    return Cluster.objects.get(name="slurm-testbed")


def _history(*, lines=1500, seed=7, energy=True):
    """Generated sacct lines; with ``energy``, every other job line has an energy record."""
    now = datetime(2026, 3, 1, tzinfo=UTC)
    produced = sacct_lines(
        lines=lines, seed=seed, start=now - timedelta(days=30), mean_gap_seconds=600, now=now
    )
    for number, line in enumerate(produced):
        fields = line.rstrip("\n").split("|")
        if energy and number % 2 and len(fields) > ENERGY_FIELD and "." not in fields[1]:
            fields[ENERGY_FIELD] = str(1000 + 37 * number)
        yield "|".join(fields) + "\n"


def _fresh_cost(model_text, job):
    model = cost_model_parse(model_text)
    cost = job_cost(
        model,
        nodes=expand_nodelist(job.nodelist),
        runtime_seconds=job.elapsed_seconds,
        energy_joules=job.consumed_energy_joules,
        node_share=_share(job),
    )
    return stored_cost(cost)


def _share(job):
    """The job's max fraction of each node (eq 1), straight from the charging engine."""
    return node_share_even(
        job.partition_version.spec, nodes=job.nnodes, cores=job.cpus, memory_mb=job.memory_mb,
        gpus=job.gpus,
    )  # fmt: skip


def _rollup_costs():
    return {
        (row.project_id, row.partition_id, row.username, row.day): row.cost
        for row in UsageDaily.objects.all()
    }


def _rollups_from_jobs(cluster):
    sums: dict = {}
    booked = Job.objects.filter(cluster=cluster, end__isnull=False).exclude(
        charge_state=Job.ChargeState.PENDING
    )
    for job in booked:
        day = job.end.astimezone(cluster.zoneinfo).date()
        key = (job.project_id, job.partition_id, job.username, day)
        sums[key] = sums.get(key, Decimal(0)) + (job.cost or Decimal(0))
    return sums


# --- Versions -----------------------------------------------------------------------------------


def test_first_version_covers_the_past_and_is_numbered_one(testbed):
    version = cost_model_version_create(cluster=testbed, name="demo", text=DEMO_MODEL)
    assert (version.number, version.effective_from, version.currency) == (1, BEGINNING, "Euro")
    found = cost_model_at(cluster=testbed, at=datetime(2020, 1, 1, tzinfo=UTC))
    assert found is not None
    assert found[0] == version
    assert [node_set.name for node_set in found[1].node_sets] == ["CPU", "GPU"]


def test_versions_append_and_are_numbered_in_order(testbed):
    cost_model_version_create(cluster=testbed, name="a", text=MODEL)
    later = datetime(2026, 2, 1, tzinfo=UTC)
    second = cost_model_version_create(cluster=testbed, name="b", text=DEARER, effective_from=later)
    assert second.number == 2
    assert cost_model_at(cluster=testbed, at=later - timedelta(seconds=1))[0].number == 1
    assert cost_model_at(cluster=testbed, at=later)[0].number == 2


def test_a_version_that_does_not_start_after_the_newest_is_refused(testbed):
    cost_model_version_create(
        cluster=testbed, name="a", text=MODEL, effective_from=datetime(2026, 2, 1, tzinfo=UTC)
    )
    with pytest.raises(CostModelRejected, match="must start after version 1"):
        cost_model_version_create(
            cluster=testbed, name="b", text=DEARER, effective_from=datetime(2026, 1, 1, tzinfo=UTC)
        )
    assert CostModelVersion.objects.count() == 1


def test_a_different_currency_from_the_earlier_versions_is_refused(testbed):
    cost_model_version_create(cluster=testbed, name="a", text=MODEL)
    with pytest.raises(CostModelRejected, match=r"currency is .dollar.*in .Euro."):
        cost_model_version_create(
            cluster=testbed, name="b", text=MODEL.replace("currency Euro\n", ""),
            effective_from=datetime(2026, 1, 1, tzinfo=UTC),
        )  # fmt: skip


def test_a_parse_error_carries_its_line_number(testbed):
    text = MODEL.replace("rate Staff 2.5 k/a", "rate Staff 2.5 k/fortnight")
    with pytest.raises(CostModelRejected) as raised:
        cost_model_version_create(cluster=testbed, name="bad", text=text)
    assert raised.value.line_number == 4
    assert "bad unit 'k/fortnight'" in raised.value.message
    assert not CostModelVersion.objects.exists()


def test_cost_model_apply_command_attaches_a_file(testbed, tmp_path, capsys):
    path = tmp_path / "testbed.cost"
    path.write_text(MODEL)
    call_command("cost_model_apply", str(path), "--cluster", "slurm-testbed")
    version = CostModelVersion.objects.get()
    assert (version.name, version.number, version.currency) == ("testbed", 1, "Euro")
    assert "cost model v1" in capsys.readouterr().out
    path.write_text("nodes X nid1001\nrate A 1 k/year\n")
    with pytest.raises(CommandError, match=r"testbed.cost:2: rate A: bad unit"):
        call_command(
            "cost_model_apply", str(path), "--cluster", "slurm-testbed",
            "--effective-from", "2026-01-01T00:00",
        )  # fmt: skip


# --- Money in the import ------------------------------------------------------------------------


def test_without_a_cost_model_jobs_have_no_money_cost(testbed):
    jobs_import(cluster=testbed, lines=_history(lines=400), source="history")
    assert not Job.objects.exclude(cost=None).exists()
    assert UsageDaily.objects.aggregate(total=Sum("cost"))["total"] == 0


def test_the_import_prices_every_finished_job_as_the_job_cost_meter_does(testbed):
    cost_model_version_create(cluster=testbed, name="a", text=MODEL)
    jobs_import(cluster=testbed, lines=_history(), source="history")
    finished = Job.objects.filter(end__isnull=False, start__isnull=False).exclude(
        charge_state=Job.ChargeState.PENDING
    )
    assert finished.count() > 100
    for job in finished:
        assert job.cost == _fresh_cost(MODEL, job), job.job_id
        assert job.cost_model_version.number == 1
    running = Job.objects.filter(charge_state=Job.ChargeState.PENDING)
    assert not running.exclude(cost=None).exists()
    assert _rollup_costs() == _rollups_from_jobs(testbed)


def test_a_job_without_an_energy_record_gets_no_energy_cost(testbed):
    cost_model_version_create(cluster=testbed, name="a", text=MODEL)
    jobs_import(cluster=testbed, lines=_history(lines=600), source="history")
    model = cost_model_parse(MODEL)
    without = Job.objects.filter(consumed_energy_joules__in=[0, None]).exclude(cost=None)
    with_energy = Job.objects.filter(consumed_energy_joules__gt=0).exclude(cost=None)
    assert without.exists()
    assert with_energy.exists()
    for job in without[:50]:
        hours = Decimal(job.elapsed_seconds) / 3600
        nodes = len(expand_nodelist(job.nodelist))
        gpu = job.nodelist.replace("[", "").startswith("nid2")
        per_hour = Decimal(24000 if gpu else 8500) / 8760
        assert abs(job.cost - per_hour * hours * nodes) < Decimal("0.00001"), job.job_id
    job = with_energy.first()
    breakdown = job_cost(
        model, nodes=expand_nodelist(job.nodelist), runtime_seconds=job.elapsed_seconds,
        energy_joules=job.consumed_energy_joules,
    )  # fmt: skip
    energy = [rate.cost for ns in breakdown.node_sets for rate in ns.rates if rate.kind == "energy"]
    assert energy
    assert all(cost is not None and cost > 0 for cost in energy)


def test_reimporting_the_same_lines_changes_no_money(testbed):
    cost_model_version_create(cluster=testbed, name="a", text=MODEL)
    jobs_import(cluster=testbed, lines=_history(lines=600), source="first")
    before = (_rollup_costs(), sorted(Job.objects.values_list("pk", "cost")))
    jobs_import(cluster=testbed, lines=_history(lines=600), source="again")
    assert (_rollup_costs(), sorted(Job.objects.values_list("pk", "cost"))) == before


def test_a_pricer_caches_node_lists_per_version():
    model = cost_model_parse(MODEL)
    pricer = JobPricer([(1, BEGINNING, model)])
    end = datetime(2026, 1, 1, tzinfo=UTC)
    first = pricer.price(end=end, nodelist="nid[1001-1002]", elapsed_seconds=3600, energy_joules=0)
    again = pricer.price(end=end, nodelist="nid[1001-1002]", elapsed_seconds=3600, energy_joules=0)
    assert first == again == (Decimal("1.940639"), 1)
    assert pricer.price(end=end, nodelist="not[a", elapsed_seconds=1, energy_joules=None) is None
    assert pricer.price(end=BEGINNING - timedelta(1), nodelist="nid1001", elapsed_seconds=1,
                        energy_joules=None) is None  # fmt: skip


# --- The recomputation after a new version -------------------------------------------------------


def test_a_new_version_recomputes_jobs_and_rollups_exactly(
    testbed, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        cost_model_version_create(cluster=testbed, name="a", text=MODEL)
    jobs_import(cluster=testbed, lines=_history(), source="history")
    switch = datetime(2026, 1, 31, 6, tzinfo=UTC)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        version = cost_model_version_create(
            cluster=testbed, name="dearer", text=DEARER, effective_from=switch
        )
    assert len(callbacks) == 1  # the task, enqueued after the commit (eager in the tests)
    booked = Job.objects.filter(end__isnull=False, start__isnull=False).exclude(
        charge_state=Job.ChargeState.PENDING
    )
    after = booked.filter(end__gte=switch)
    assert after.exists()
    assert booked.filter(end__lt=switch).exists()
    for job in after:
        assert job.cost_model_version_id == version.pk
        assert job.cost == _fresh_cost(DEARER, job)
    for job in booked.filter(end__lt=switch):
        assert job.cost_model_version.number == 1
        assert job.cost == _fresh_cost(MODEL, job)
    assert _rollup_costs() == _rollups_from_jobs(testbed)
    # Idempotent: a second run changes nothing.
    again = job_costs_recompute(cluster=testbed, since=switch)
    assert again.jobs_changed == 0
    assert again.days_fixed == 0
    assert again.jobs_read == after.count()


def test_recomputing_in_small_batches_gives_the_same_money(testbed):
    cost_model_version_create(cluster=testbed, name="a", text=MODEL)
    jobs_import(cluster=testbed, lines=_history(lines=800), source="history")
    Job.objects.update(cost=None, cost_model_version=None)
    UsageDaily.objects.update(cost=0)
    result = job_costs_recompute(cluster=testbed, since=BEGINNING, batch_size=7)
    assert result.jobs_changed > 0
    for job in Job.objects.exclude(start=None).exclude(charge_state=Job.ChargeState.PENDING):
        assert job.cost == _fresh_cost(MODEL, job)
    assert _rollup_costs() == _rollups_from_jobs(testbed)


def test_a_pricer_is_built_even_when_the_parsed_model_cache_fills_while_loading(
    testbed, monkeypatch
):
    # The cache of parsed models is bounded; it used to be emptied while JobPricer was loading
    # a cluster's versions, which then raised KeyError and broke every import of the cluster.
    import accounting.costs.services as costs

    monkeypatch.setattr(costs, "_PARSED_LIMIT", 2)
    monkeypatch.setattr(costs, "_parsed", {})
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for month in range(3):
        cost_model_version_create(
            cluster=testbed,
            name=f"m{month}",
            text=MODEL,
            effective_from=start + timedelta(days=31 * month),
        )
    costs._parsed.clear()  # a new worker process: every version is parsed on first use
    pricer = JobPricer.for_cluster(testbed)
    assert pricer is not None
    assert len(pricer.versions) == 3


def test_a_recomputation_stopped_half_way_leaves_jobs_and_rollups_agreeing(testbed, monkeypatch):
    import accounting.costs.services as costs

    cost_model_version_create(cluster=testbed, name="a", text=MODEL)
    jobs_import(cluster=testbed, lines=_history(lines=800), source="history")
    cost_model_version_create(
        cluster=testbed, name="dearer", text=DEARER, effective_from=datetime(2026, 2, 1, tzinfo=UTC)
    )
    Job.objects.update(cost=None, cost_model_version=None)  # as if nothing had been priced
    UsageDaily.objects.update(cost=0)
    write = costs._job_costs_write
    calls = []

    def dies_on_the_third_batch(updates):
        calls.append(len(updates))
        if len(calls) == 3:
            raise RuntimeError("worker lost")
        write(updates)

    monkeypatch.setattr(costs, "_job_costs_write", dies_on_the_third_batch)
    with pytest.raises(RuntimeError):
        job_costs_recompute(cluster=testbed, since=BEGINNING, batch_size=40)
    priced = Job.objects.exclude(cost=None).count()
    assert 0 < priced < Job.objects.exclude(start=None).count()
    assert _rollup_costs() == _rollups_from_jobs(testbed)  # each batch committed whole

    monkeypatch.setattr(costs, "_job_costs_write", write)
    job_costs_recompute(cluster=testbed, since=BEGINNING)  # run again: finishes the work
    switch = datetime(2026, 2, 1, tzinfo=UTC)
    for job in Job.objects.exclude(start=None).exclude(charge_state=Job.ChargeState.PENDING):
        assert job.cost == _fresh_cost(DEARER if job.end >= switch else MODEL, job)
    assert _rollup_costs() == _rollups_from_jobs(testbed)


def test_a_cost_beyond_the_ledger_quarantines_the_line_and_a_sane_version_charges_it(
    testbed, django_capture_on_commit_callbacks
):
    from accounting.models import QuarantinedRecord

    absurd = MODEL.replace("rate Hardware 6 k/a", "rate Hardware 1000000000000000 M/s")
    cost_model_version_create(cluster=testbed, name="absurd", text=absurd)
    _, summary = jobs_import(cluster=testbed, lines=_history(lines=200), source="history")
    held = QuarantinedRecord.objects.filter(cluster=testbed, resolved_at__isnull=True)
    assert summary.quarantined == held.count() > 0
    assert all("beyond what the ledger keeps" in record.reason for record in held)
    assert not Job.objects.filter(cost__gte=Decimal(10) ** 18).exists()

    with django_capture_on_commit_callbacks(execute=True):  # the retry runs after the commit
        cost_model_version_create(
            cluster=testbed, name="sane", text=MODEL,
            effective_from=datetime(2025, 1, 1, tzinfo=UTC),
        )  # fmt: skip
    assert not QuarantinedRecord.objects.filter(cluster=testbed, resolved_at__isnull=True).exists()
    for job in Job.objects.exclude(start=None).exclude(charge_state=Job.ChargeState.PENDING):
        assert job.cost == _fresh_cost(MODEL, job)
    assert _rollup_costs() == _rollups_from_jobs(testbed)


# --- Shared nodes (issue 29): a job pays its share of each node -----------------------------------


def _finished():
    return Job.objects.filter(end__isnull=False, start__isnull=False).exclude(
        charge_state=Job.ChargeState.PENDING
    )


def test_the_import_prices_each_job_for_its_share_of_its_nodes_under_a_shared_model(testbed):
    cost_model_version_create(cluster=testbed, name="shared", text=SHARED)
    jobs_import(cluster=testbed, lines=_history(), source="history")
    finished = _finished().select_related("partition_version__partition")
    assert finished.count() > 100
    parts = 0
    for job in finished:
        assert job.cost == _fresh_cost(SHARED, job), job.job_id
        share = _share(job)
        if share < 1:
            parts += 1
            assert job.cost < _fresh_cost(MODEL, job) or job.elapsed_seconds == 0, job.job_id
        else:  # a job that holds its nodes whole pays them whole
            assert job.cost == _fresh_cost(MODEL, job), job.job_id
    assert parts > 50
    assert _rollup_costs() == _rollups_from_jobs(testbed)


def test_the_job_page_coststats_and_the_stored_costs_follow_the_one_rule(testbed):
    version = cost_model_version_create(cluster=testbed, name="shared", text=SHARED)
    jobs_import(cluster=testbed, lines=_history(lines=800), source="history")
    model = cost_model_parse(SHARED)
    rows = {}
    cost_table_get(model=model, cluster=testbed, on_row=lambda row: rows.update({row.job_id: row}))
    finished = _finished().exclude(nodelist="")
    assert len(rows) == finished.count() > 50
    for job in finished:
        breakdown = job_cost_get(model=model, job=job)
        assert breakdown.node_share == _share(job)
        assert stored_cost(breakdown) == job.cost == stored_cost(rows[job.job_id]), job.job_id
        assert job.cost_model_version_id == version.pk


def test_a_shared_version_recomputes_the_jobs_for_their_shares(
    testbed, django_capture_on_commit_callbacks
):
    cost_model_version_create(cluster=testbed, name="exclusive", text=MODEL)
    jobs_import(cluster=testbed, lines=_history(), source="history")
    switch = datetime(2026, 1, 31, 6, tzinfo=UTC)
    with django_capture_on_commit_callbacks(execute=True):
        cost_model_version_create(
            cluster=testbed, name="shared", text=SHARED, effective_from=switch
        )
    after = _finished().filter(end__gte=switch)
    assert after.exists()
    assert any(_share(job) < 1 for job in after)
    for job in after:
        assert job.cost == _fresh_cost(SHARED, job), job.job_id
    for job in _finished().filter(end__lt=switch):
        assert job.cost == _fresh_cost(MODEL, job), job.job_id
    assert _rollup_costs() == _rollups_from_jobs(testbed)
    assert job_costs_recompute(cluster=testbed, since=switch).jobs_changed == 0


def test_a_pricer_prices_a_job_for_its_share_and_whole_nodes_without_a_shape(testbed):
    version = testbed.partitions.get(name="gpu").versions.get()
    pricer = JobPricer([(1, BEGINNING, cost_model_parse(SHARED))])
    end = datetime(2026, 1, 1, tzinfo=UTC)
    one_gpu = JobShape(version.pk, 1, 8, Decimal(30625), 1)
    whole = pricer.price(end=end, nodelist="nid2001", elapsed_seconds=8760 * 36, energy_joules=0)
    part = pricer.price(
        end=end, nodelist="nid2001", elapsed_seconds=8760 * 36, energy_joules=0, shape=one_gpu
    )
    assert whole == (Decimal("240"), 1)  # 24 kEuro a year, for 1/100 of a year
    assert part == (Decimal("30"), 1)  # an eighth of the node
    # A shape the engine refuses (more GPUs than the node has): whole nodes, as for no shape.
    refused = one_gpu._replace(gpus=9)
    assert (
        pricer.price(
            end=end, nodelist="nid2001", elapsed_seconds=8760 * 36, energy_joules=0, shape=refused
        )
        == whole
    )


def test_a_bad_nodes_are_line_is_refused_with_its_line_and_nothing_is_saved(testbed):
    text = MODEL + "nodes-are sometimes\n"
    with pytest.raises(CostModelRejected) as refused:
        cost_model_version_create(cluster=testbed, name="bad", text=text)
    assert refused.value.line_number == len(MODEL.splitlines()) + 1
    assert "nodes-are 'sometimes': expected exclusive or shared" in str(refused.value)
    assert not CostModelVersion.objects.exists()
