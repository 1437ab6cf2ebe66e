"""Dynamic priority in the portal: a cluster's policy (eq 14, corrected in DESIGN section 4),
the profilers' coefficients ``K_prof`` staff post, each project's effective K and Pr_dyn, and
the reviewable Slurm commands that apply them (like ``allocations/slurm/enforcement.py``).

The maths is ``accounting/utilisation/priority.py``; here are the rules that need the database:

- **A project's effective K** (``project_k_prof_get``), per cluster. Coefficients are
  append-only and the newest counts. The newest *project-level* value P is the starting
  point. Job-level values posted after P (each job's newest one) replace it by their mean
  weighted by the jobs' SU (``service_units + pending_service_units``; a plain mean when those
  are all 0). Job-level values posted before P are superseded by it: a project-level value
  posted after the newest job-level one wins. No coefficient at all: no K, no priority.
- **The Slurm priority** a command sets is Pr_dyn rounded half up to a whole number and kept
  within Slurm's range 0 .. 4294967294 (a QOS priority is an unsigned 32-bit number; eq 14
  itself is not clamped and can go below 0 far below K1).
- **The QOS** ``{qos}`` of a project is its Slurm account name, the project code (one QOS per
  project, named like the account). ``{account}`` is the same code, ``{cluster}`` the
  cluster's name, ``{priority}`` the Slurm priority; each is shell-quoted when rendered, and
  the command runs without a shell.
- **Proposals** (``priority_actions_propose``): a project gets a proposed action when the
  command for its current priority differs from the last one executed, and from the newest
  proposed or dismissed one since (a dismissed command is not proposed again until the
  priority changes). Older proposals of the project are superseded. Running it again changes
  nothing.
"""

from __future__ import annotations

import csv
import io
import shlex
import string
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from accounting.models import Cluster, Job
from accounting.utilisation import priority as maths
from allocations.grants.services import AllocationError
from allocations.models import PriorityAction, PriorityPolicy, ProfilingCoefficient
from allocations.slurm.commands import slurm_command_run
from kit.access import is_staff, require
from projects.access import ProjectReadOnly, project_is_writable, project_writable_check
from projects.models import Project

DEFAULT_COMMAND_TEMPLATE = "sacctmgr --immediate modify qos {qos} set priority={priority}"
PLACEHOLDERS = ("qos", "account", "cluster", "priority")
SLURM_PRIORITY_MAX = 2**32 - 2  # a QOS priority is a uint32; 2**32 - 1 means "not set"
CSV_MAX_LINES = 10_000
_SIX_PLACES = Decimal("0.000001")
_DB_LIMIT = Decimal(10) ** 14  # DecimalField(max_digits=20, decimal_places=6)
_WIDE = Context(prec=80)  # quantizing a Pr_dyn of any size the policy fields allow


class PriorityError(AllocationError):
    """A policy, coefficient or action that the dynamic priority rules refuse."""


@dataclass(frozen=True)
class CsvLineError:
    line: int
    column: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", column {self.column}" if self.column else "")
        return f"{where}: {self.message}"


class ProfilingCsvError(PriorityError):
    """A CSV upload that was refused as a whole; ``errors`` names each line and column."""

    def __init__(self, errors: list[CsvLineError]) -> None:
        self.errors = errors
        shown = "; ".join(str(error) for error in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        super().__init__(f"nothing was imported: {shown}{more}")


# --- Helpers ----------------------------------------------------------------------------------


def _number(name: str, value: Any, *, minimum: Decimal | None = None) -> Decimal:
    """A value the policy's and coefficients' DecimalField(20, 6) columns hold, or an error."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal | str):
        raise PriorityError(f"{name} must be a decimal number, got {value!r}")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise PriorityError(f"{name} must be a decimal number, got {value!r}") from None
    if not number.is_finite():
        raise PriorityError(f"{name} must be finite, got {value!r}")
    if number != number.quantize(_SIX_PLACES, context=_WIDE):
        raise PriorityError(f"{name} has more than 6 decimal places: {value}")
    if abs(number) >= _DB_LIMIT:
        raise PriorityError(f"{name} is out of range (at most 14 digits before the point)")
    if minimum is not None and number < minimum:
        raise PriorityError(f"{name} must be at least {minimum}, got {number}")
    return number


def decimal_text(value: Decimal | None) -> str:
    """A decimal as people write it: no trailing zeros, never an exponent (900, 0.35)."""
    if value is None:
        return "\u2013"
    text = f"{value.normalize():f}"
    return "0" if text == "-0" else text


def command_template_check(template: str) -> str:
    """The template, or an error naming what is wrong: only the placeholders {qos},
    {account}, {cluster} and {priority} (which it must use), and quotes that balance."""
    template = template.strip()
    if not template:
        raise PriorityError("the command template is empty")
    try:
        fields = [
            (name, spec, conversion)
            for _, name, spec, conversion in string.Formatter().parse(template)
            if name is not None
        ]
    except ValueError as error:
        raise PriorityError(f"the command template is not valid: {error}") from None
    for name, spec, conversion in fields:
        if name not in PLACEHOLDERS:
            known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
            shown = f"{{{name}}}" if name else "{}"
            raise PriorityError(f"unknown placeholder {shown} in the command template ({known})")
        if spec or conversion:
            raise PriorityError(f"placeholder {{{name}}} takes no format or conversion")
    if "priority" not in {name for name, _, _ in fields}:
        raise PriorityError("the command template must use {priority}")
    try:
        shlex.split(template)
    except ValueError as error:
        raise PriorityError(f"the command template does not split into words: {error}") from None
    return template


def policy_maths(policy: PriorityPolicy) -> maths.PriorityPolicy:
    """The pure policy of ``accounting.utilisation.priority`` for a stored one."""
    return maths.PriorityPolicy(
        k1=policy.k1, k2=policy.k2, c0=policy.c0, c1=policy.c1, c2=policy.c2
    )


def slurm_priority(pr_dyn: Decimal) -> int:
    """Pr_dyn as Slurm takes it: a whole number in 0 .. 4294967294."""
    whole = pr_dyn.quantize(Decimal(1), rounding=ROUND_HALF_UP, context=_WIDE)
    return int(min(max(whole, Decimal(0)), Decimal(SLURM_PRIORITY_MAX)))


def priority_command_render(
    *, template: str, cluster: Cluster, project: Project, priority: int
) -> str:
    code = shlex.quote(project.code)
    return template.format(
        qos=code, account=code, cluster=shlex.quote(cluster.name), priority=priority
    )


def _require_staff(actor: User | AnonymousUser | None, message: str) -> None:
    require(actor is not None and is_staff(actor), message)


# --- Policy -----------------------------------------------------------------------------------


def priority_policy_get(*, cluster: Cluster) -> PriorityPolicy | None:
    return PriorityPolicy.objects.filter(cluster=cluster).first()


@transaction.atomic
def priority_policy_set(
    *,
    cluster: Cluster,
    base_priority: Decimal | int | str,
    k1: Decimal | int | str,
    k2: Decimal | int | str,
    c0: Decimal | int | str,
    c1: Decimal | int | str,
    c2: Decimal | int | str,
    command_template: str = DEFAULT_COMMAND_TEMPLATE,
    execution_enabled: bool = False,
    updated_by: User,
) -> PriorityPolicy:
    """Create or replace the cluster's dynamic priority policy (staff). K1 must be below K2."""
    _require_staff(updated_by, "only centre staff set priority policies")
    values = {
        "base_priority": _number("Pr_base", base_priority, minimum=Decimal(0)),
        "k1": _number("K1", k1),
        "k2": _number("K2", k2),
        "c0": _number("C0", c0),
        "c1": _number("C1", c1),
        "c2": _number("C2", c2),
    }
    if not values["k1"] < values["k2"]:
        raise PriorityError(
            "the thresholds must satisfy K1 < K2, got "
            f"K1={decimal_text(values['k1'])} and K2={decimal_text(values['k2'])}"
        )
    policy, _ = PriorityPolicy.objects.update_or_create(
        cluster=cluster,
        defaults={
            **values,
            "command_template": command_template_check(command_template),
            "execution_enabled": bool(execution_enabled),
            "updated_by": updated_by,
        },
    )
    return policy


# --- Profiling coefficients ------------------------------------------------------------------


def _check_job(*, job: Job, cluster: Cluster, project: Project) -> None:
    if job.cluster_id != cluster.pk:
        raise PriorityError(f"job {job.job_id_raw} ran on another cluster, not {cluster.name}")
    if job.project_id != project.pk:
        raise PriorityError(f"job {job.job_id_raw} is not a job of project {project.code}")


def profiling_coefficient_post(
    *,
    cluster: Cluster,
    project: Project,
    k_prof: Decimal | int | str,
    job: Job | None = None,
    note: str = "",
    source: str = ProfilingCoefficient.Source.FORM,
    posted_by: User,
) -> ProfilingCoefficient:
    """Record a profiler's K_prof for a project, or for one of its jobs on this cluster
    (staff). Append-only: the newest value counts (see the module's rule for K)."""
    _require_staff(posted_by, "only centre staff post profiling coefficients")
    project_writable_check(project)
    value = _number("K_prof", k_prof, minimum=Decimal(0))
    if source not in ProfilingCoefficient.Source.values:
        raise PriorityError(f"unknown source {source!r}")
    if job is not None:
        _check_job(job=job, cluster=cluster, project=project)
    return ProfilingCoefficient.objects.create(
        cluster=cluster, project=project, job=job, k_prof=value, source=source,
        note=note.strip(), posted_by=posted_by,
    )  # fmt: skip


def profiling_coefficients_post(
    *,
    coefficients: Iterable[Mapping[str, Any]],
    source: str = ProfilingCoefficient.Source.API,
    posted_by: User,
) -> list[ProfilingCoefficient]:
    """Post several K_prof at once, all or none (the API's list body). Each item has the
    arguments of :func:`profiling_coefficient_post`: cluster, project, k_prof, job, note."""
    with transaction.atomic():
        return [
            profiling_coefficient_post(
                cluster=item["cluster"],
                project=item["project"],
                k_prof=item["k_prof"],
                job=item.get("job"),
                note=item.get("note", ""),
                source=source,
                posted_by=posted_by,
            )
            for item in coefficients
        ]


def jobs_by_slurm_id(*, cluster: Cluster, job_ids: Iterable[str]) -> dict[str, list[Job]]:
    """Jobs of the cluster by Slurm job id (JobIDRaw, or JobID such as ``123_4``); only a
    job's current run counts. Ids that name no job are missing from the answer."""
    wanted = {job_id for job_id in job_ids if job_id}
    found: dict[str, list[Job]] = defaultdict(list)
    if not wanted:
        return found
    jobs = Job.objects.filter(
        Q(job_id_raw__in=wanted) | Q(job_id__in=wanted), cluster=cluster, run=""
    ).select_related("project")
    for job in jobs:
        for key in {job.job_id_raw, job.job_id} & wanted:
            found[key].append(job)
    return found


def profiled_job_get(*, cluster: Cluster, project: Project, job_id: str) -> Job:
    """The one job of ``project`` on ``cluster`` that a Slurm job id names, for a job-level
    K_prof (form and API); PriorityError says why there is none."""
    matches = jobs_by_slurm_id(cluster=cluster, job_ids=[job_id]).get(job_id, [])
    if len(matches) != 1:
        problem = "no job" if not matches else "several jobs"
        raise PriorityError(f"{problem} with id {job_id} on {cluster.name}")
    _check_job(job=matches[0], cluster=cluster, project=project)
    return matches[0]


CSV_COLUMNS = ("project", "k_prof", "job_id", "note")


def profiling_coefficients_import_csv(
    *, cluster: Cluster, text: str, posted_by: User
) -> list[ProfilingCoefficient]:
    """Import ``project,k_prof[,job_id][,note]`` lines (with that header) for the cluster:
    all or nothing. A refusal lists each bad line and column (``ProfilingCsvError``)."""
    _require_staff(posted_by, "only centre staff post profiling coefficients")
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    errors: list[CsvLineError] = []
    header = next(reader, None)
    if header is None or not any(cell.strip() for cell in header):
        raise ProfilingCsvError([CsvLineError(1, "", "the file is empty; expected a header")])
    columns = [cell.strip().lower() for cell in header]
    for column in columns:
        if column not in CSV_COLUMNS:
            errors.append(
                CsvLineError(1, column, f"unknown column (expected {', '.join(CSV_COLUMNS)})")
            )
    for required in ("project", "k_prof"):
        if required not in columns:
            errors.append(CsvLineError(1, required, "missing column in the header"))
    if len(set(columns)) != len(columns):
        errors.append(CsvLineError(1, "", "a column is named twice in the header"))
    if errors:
        raise ProfilingCsvError(errors)

    rows: list[tuple[int, dict[str, str]]] = []
    try:
        for cells in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in cells):
                continue
            if len(rows) >= CSV_MAX_LINES:
                raise ProfilingCsvError(
                    [CsvLineError(line, "", f"more than {CSV_MAX_LINES} lines; split the file")]
                )
            if len(cells) > len(columns):
                errors.append(
                    CsvLineError(line, "", f"{len(cells)} values for {len(columns)} columns")
                )
                continue
            values = {column: cell.strip() for column, cell in zip(columns, cells, strict=False)}
            bad = [column for column, value in values.items() if "\x00" in value]
            if bad:
                errors.extend(CsvLineError(line, column, "holds a NUL character") for column in bad)
                continue
            rows.append((line, values))
    except csv.Error as error:
        line = reader.line_num
        raise ProfilingCsvError([CsvLineError(line, "", f"not valid CSV: {error}")]) from None
    if not rows and not errors:
        raise ProfilingCsvError([CsvLineError(1, "", "no lines after the header")])

    projects = Project.objects.in_bulk(
        {values.get("project", "") for _, values in rows}, field_name="code"
    )
    jobs = jobs_by_slurm_id(
        cluster=cluster, job_ids=(values.get("job_id", "") for _, values in rows)
    )
    valid: list[ProfilingCoefficient] = []
    for line, values in rows:
        code = values.get("project", "")
        project = projects.get(code)
        if not code:
            errors.append(CsvLineError(line, "project", "missing"))
        elif project is None:
            errors.append(CsvLineError(line, "project", f"unknown project {code!r}"))
        elif not project_is_writable(project):
            errors.append(CsvLineError(line, "project", str(ProjectReadOnly(project))))
        try:
            k_prof = _number("K_prof", values.get("k_prof", ""), minimum=Decimal(0))
        except PriorityError as error:
            errors.append(CsvLineError(line, "k_prof", str(error)))
            continue
        job = None
        job_id = values.get("job_id", "")
        if job_id:
            matches = jobs.get(job_id, [])
            if not matches:
                errors.append(CsvLineError(line, "job_id", f"no job {job_id} on {cluster.name}"))
                continue
            if len(matches) > 1:
                errors.append(CsvLineError(line, "job_id", f"job id {job_id} names several jobs"))
                continue
            job = matches[0]
            if project is not None and job.project_id != project.pk:
                errors.append(
                    CsvLineError(line, "job_id", f"job {job_id} is not a job of {project.code}")
                )
                continue
        if project is None:
            continue
        valid.append(
            ProfilingCoefficient(
                cluster=cluster,
                project=project,
                job=job,
                k_prof=k_prof,
                source=ProfilingCoefficient.Source.CSV,
                note=values.get("note", ""),
                posted_by=posted_by,
            )
        )
    if errors:
        raise ProfilingCsvError(sorted(errors, key=lambda error: error.line))
    with transaction.atomic():
        # One by one, so that posted_at follows the file's order (the later line is newer).
        for coefficient in valid:
            coefficient.save()
    return valid


def profiling_coefficients_list(
    *, cluster: Cluster | None = None, project: Project | None = None
) -> Any:
    """Posted coefficients, newest first."""
    coefficients = ProfilingCoefficient.objects.select_related(
        "cluster", "project", "job", "posted_by"
    ).order_by("-posted_at", "-pk")
    if cluster is not None:
        coefficients = coefficients.filter(cluster=cluster)
    if project is not None:
        coefficients = coefficients.filter(project=project)
    return coefficients


# --- Effective K and priorities ----------------------------------------------------------------


@dataclass(frozen=True)
class EffectiveK:
    """A project's K on a cluster and where it came from."""

    k_prof: Decimal
    source: str  # "project": a project-level value; "jobs": the SU-weighted mean of jobs'
    jobs: int  # how many jobs' values the mean took (0 for a project-level value)
    posted_at: datetime  # the newest value it used

    @property
    def source_label(self) -> str:
        if self.source == "project":
            return "project value"
        return f"SU-weighted mean of {self.jobs} job{'s' if self.jobs != 1 else ''}"


@dataclass(frozen=True)
class _Posted:
    pk: int
    job_id: int | None
    k_prof: Decimal
    posted_at: datetime


def _effective_k(posted: list[_Posted], job_su: dict[int, Decimal]) -> EffectiveK | None:
    """The module's rule for K over one project's coefficients on one cluster."""
    if not posted:
        return None
    newest_first = sorted(posted, key=lambda row: (row.posted_at, row.pk), reverse=True)
    project_value = next((row for row in newest_first if row.job_id is None), None)
    per_job: dict[int, _Posted] = {}
    for row in newest_first:
        if row is project_value:
            break  # job values before the newest project value are superseded by it
        assert row.job_id is not None  # newer than the newest project-level value
        per_job.setdefault(row.job_id, row)
    if not per_job:
        assert project_value is not None
        return EffectiveK(project_value.k_prof, "project", 0, project_value.posted_at)
    weights = {job_id: job_su.get(job_id, Decimal(0)) for job_id in per_job}
    total = sum(weights.values(), Decimal(0))
    if total > 0:
        mean = sum((per_job[j].k_prof * w for j, w in weights.items()), Decimal(0)) / total
    else:
        mean = sum((row.k_prof for row in per_job.values()), Decimal(0)) / len(per_job)
    newest = max(row.posted_at for row in per_job.values())
    return EffectiveK(mean.quantize(_SIX_PLACES, context=_WIDE), "jobs", len(per_job), newest)


def _effective_ks(*, cluster: Cluster, project: Project | None = None) -> dict[int, EffectiveK]:
    coefficients = ProfilingCoefficient.objects.filter(cluster=cluster)
    if project is not None:
        coefficients = coefficients.filter(project=project)
    by_project: dict[int, list[_Posted]] = defaultdict(list)
    job_ids = set()
    for row in coefficients.values("pk", "project_id", "job_id", "k_prof", "posted_at"):
        by_project[row["project_id"]].append(
            _Posted(row["pk"], row["job_id"], row["k_prof"], row["posted_at"])
        )
        if row["job_id"] is not None:
            job_ids.add(row["job_id"])
    job_su = {
        row["pk"]: row["service_units"] + row["pending_service_units"]
        for row in Job.objects.filter(pk__in=job_ids).values(
            "pk", "service_units", "pending_service_units"
        )
    }
    result = {}
    for project_id, posted in by_project.items():
        effective = _effective_k(posted, job_su)
        if effective is not None:
            result[project_id] = effective
    return result


def project_k_prof_get(*, cluster: Cluster, project: Project) -> EffectiveK | None:
    """The project's effective K on the cluster (the module's rule), or None without any."""
    return _effective_ks(cluster=cluster, project=project).get(project.pk)


@dataclass(frozen=True)
class ProjectPriority:
    project: Project
    k: EffectiveK
    pr_dyn: Decimal | None  # None while the cluster has no policy
    slurm_priority: int | None
    command: str | None
    last_action: PriorityAction | None  # the newest one that is not superseded


def _pr_dyn(policy: PriorityPolicy, k_prof: Decimal) -> Decimal:
    value = maths.dynamic_priority(
        base=policy.base_priority, k_prof=k_prof, policy=policy_maths(policy)
    )  # eq 14
    return value.quantize(_SIX_PLACES, context=_WIDE)


def project_priorities_get(*, cluster: Cluster) -> list[ProjectPriority]:
    """Every project with a K on the cluster: K, Pr_dyn (eq 14) and the Slurm command."""
    policy = priority_policy_get(cluster=cluster)
    ks = _effective_ks(cluster=cluster)
    projects = Project.objects.in_bulk(list(ks))
    newest = (
        PriorityAction.objects.filter(cluster=cluster, project_id__in=list(ks))
        .exclude(status=PriorityAction.Status.SUPERSEDED)
        .values("project_id")
        .annotate(newest=Max("pk"))
        .values_list("newest", flat=True)
    )
    last_actions = {
        action.project_id: action for action in PriorityAction.objects.filter(pk__in=newest)
    }
    rows = []
    for project_id, k in ks.items():
        project = projects[project_id]
        if policy is None:
            rows.append(ProjectPriority(project, k, None, None, None, last_actions.get(project_id)))
            continue
        pr_dyn = _pr_dyn(policy, k.k_prof)
        whole = slurm_priority(pr_dyn)
        command = priority_command_render(
            template=policy.command_template, cluster=cluster, project=project, priority=whole
        )
        rows.append(
            ProjectPriority(project, k, pr_dyn, whole, command, last_actions.get(project_id))
        )
    return sorted(rows, key=lambda row: row.project.code)


# --- Actions ---------------------------------------------------------------------------------


@transaction.atomic
def priority_actions_propose(*, cluster: Cluster) -> list[PriorityAction]:
    """Propose the Slurm command of each project whose priority changed (module's rule);
    returns the new proposals. Idempotent; older proposals of a project are superseded."""
    policy = PriorityPolicy.objects.select_for_update().filter(cluster=cluster).first()
    if policy is None:
        raise PriorityError(f"cluster {cluster.name} has no priority policy; set one first")
    created = []
    for row in project_priorities_get(cluster=cluster):
        assert row.command is not None
        assert row.slurm_priority is not None
        actions = PriorityAction.objects.filter(cluster=cluster, project=row.project)
        proposed = actions.filter(status=PriorityAction.Status.PROPOSED)
        executed = (
            actions.filter(status=PriorityAction.Status.EXECUTED)
            .order_by("-executed_at", "-pk")
            .first()
        )
        if executed is not None and executed.command == row.command:
            proposed.update(status=PriorityAction.Status.SUPERSEDED)
            continue
        since = actions.filter(
            status__in=[PriorityAction.Status.PROPOSED, PriorityAction.Status.DISMISSED]
        )
        if executed is not None:
            since = since.filter(created_at__gt=executed.created_at)
        latest = since.order_by("-created_at", "-pk").first()
        if latest is not None and latest.command == row.command:
            proposed.exclude(pk=latest.pk).update(status=PriorityAction.Status.SUPERSEDED)
            continue
        proposed.update(status=PriorityAction.Status.SUPERSEDED)
        created.append(
            PriorityAction.objects.create(
                cluster=cluster,
                project=row.project,
                k_prof=row.k.k_prof,
                priority=row.slurm_priority,
                command=row.command,
            )
        )
    return created


def priority_action_execute(*, action: PriorityAction, reviewed_by: User) -> PriorityAction:
    """Run a proposed action's command (staff), when the cluster's policy enables execution;
    records the reviewer, exit code and output (``allocations.slurm.commands``).

    The action is claimed in a short transaction (reviewer and start time set), and the
    command runs after it commits, so no database lock is held while Slurm answers; a second
    request for the same action finds it claimed and runs nothing.
    """
    _require_staff(reviewed_by, "only centre staff run Slurm priority commands")
    with transaction.atomic():
        action = (
            PriorityAction.objects.select_for_update().select_related("cluster").get(pk=action.pk)
        )
        if action.status != PriorityAction.Status.PROPOSED:
            raise PriorityError(f"this action is {action.status}, not proposed; nothing was run")
        if action.executed_at is not None:
            raise PriorityError("this action is being run by another request; nothing was run")
        policy = priority_policy_get(cluster=action.cluster)
        if policy is None or not policy.execution_enabled:
            raise PriorityError(
                f"execution is not enabled in the priority policy of {action.cluster.name}; "
                "run the command by hand and dismiss it, or enable execution"
            )
        action.executed_at, action.reviewed_by = timezone.now(), reviewed_by
        action.save(update_fields=["executed_at", "reviewed_by"])
    outcome = slurm_command_run(action.command)
    action.exit_code, action.output = outcome.exit_code, outcome.output
    action.status = (
        PriorityAction.Status.EXECUTED if outcome.succeeded else PriorityAction.Status.FAILED
    )
    action.save(update_fields=["exit_code", "output", "status"])
    return action


def priority_actions_execute_proposed(
    *, cluster: Cluster, reviewed_by: User
) -> list[tuple[PriorityAction, PriorityError | None]]:
    """Run every proposed action of ``cluster``, oldest first (the command's ``--execute``):
    each action with the reason it was not run, or None when it was."""
    _require_staff(reviewed_by, "only centre staff run Slurm priority commands")
    waiting = PriorityAction.objects.filter(
        cluster=cluster, status=PriorityAction.Status.PROPOSED
    ).order_by("created_at", "pk")
    results: list[tuple[PriorityAction, PriorityError | None]] = []
    for action in waiting:
        try:
            results.append((priority_action_execute(action=action, reviewed_by=reviewed_by), None))
        except PriorityError as error:
            results.append((action, error))
    return results


def priority_action_dismiss(*, action: PriorityAction, reviewed_by: User) -> PriorityAction:
    """Dismiss a proposed action (staff): it is not run, nor proposed again unless the
    project's priority changes."""
    _require_staff(reviewed_by, "only centre staff dismiss Slurm priority commands")
    with transaction.atomic():
        action = PriorityAction.objects.select_for_update().get(pk=action.pk)
        if action.status != PriorityAction.Status.PROPOSED:
            raise PriorityError(f"this action is {action.status}, not proposed")
        action.status = PriorityAction.Status.DISMISSED
        action.reviewed_by = reviewed_by
        action.save(update_fields=["status", "reviewed_by"])
    return action


def priority_actions_recent(*, cluster: Cluster, limit: int = 200) -> list[PriorityAction]:
    """The cluster's actions, proposed first, then newest first."""
    actions = PriorityAction.objects.filter(cluster=cluster).select_related(
        "project", "reviewed_by"
    )
    proposed = list(actions.filter(status=PriorityAction.Status.PROPOSED).order_by("project__code"))
    others = list(
        actions.exclude(status=PriorityAction.Status.PROPOSED).order_by("-created_at", "-pk")[
            : max(limit - len(proposed), 0)
        ]
    )
    return proposed + others


def priority_proposals_run(*, clusters: Iterable[Cluster] | None = None) -> dict[str, int]:
    """Propose actions on every cluster that has a policy (the periodic task)."""
    if clusters is None:
        clusters = Cluster.objects.filter(priority_policy__isnull=False).order_by("name")
    return {cluster.name: len(priority_actions_propose(cluster=cluster)) for cluster in clusters}
