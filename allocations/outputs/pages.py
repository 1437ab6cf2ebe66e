"""Pages of research outputs: add (with the optional "fill from DOI"), change, delete, upload a
BibTeX file, and the CSV and BibTeX exports. The list is on the project page.

Who asks is checked first: a project the user may not see is 404 (``project_for_user``), a
write by someone who may read but not edit is 403 with the rule (``can_edit_outputs``), and only
then is the input read. An archived project is refused by the services (``ProjectReadOnly``,
shown on the project page by ``portal.readonly``)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from allocations.access import can_edit_outputs
from allocations.models import ResearchOutput
from allocations.outputs.doi import DoiError, doi_normalise
from allocations.outputs.exports import outputs_bibtex, outputs_csv
from allocations.outputs.forms import BibtexUploadForm, OutputForm
from allocations.outputs.lookup import DoiLookupError, doi_lookup
from allocations.outputs.selectors import outputs_since
from allocations.outputs.services import (
    OutputError,
    output_add,
    output_delete,
    output_update,
    outputs_import_bibtex,
)
from kit.access import require
from kit.errors import ApplicationError
from projects.access import project_writable_check
from projects.models import Project
from projects.selectors import project_for_user


def _me(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # login_required ran
    return request.user


def _project(request: HttpRequest, code: str, *, edit: bool) -> Project:
    """The project if the user may see it (else 404); with ``edit``, also 403 unless they may
    change its outputs, and the archived project's refusal."""
    project = project_for_user(user=request.user, code=code)
    if project is None:
        raise Http404
    if edit:
        require(
            can_edit_outputs(request.user, project),
            f"only the PI or a manager of {project} changes its research outputs",
        )
        project_writable_check(project)
    return project


def _back(project: Project) -> HttpResponse:
    return redirect(f"/allocations/projects/{project.code}/#outputs")


def _form_page(
    request: HttpRequest, project: Project, form: OutputForm, output: ResearchOutput | None
) -> HttpResponse:
    context = {
        "project": project,
        "form": form,
        "output": output,
        "lookup": bool(settings.PORTAL_DOI_LOOKUP_URL),
    }
    return render(request, "allocations/output_form.html", context)


def _filled_from_doi(request: HttpRequest, form: OutputForm) -> OutputForm:
    """The form again with title, authors, year and venue from the DOI lookup; on a failure
    the same form with the reason on the DOI field. Nothing is saved either way."""
    data = request.POST.copy()
    try:
        doi = doi_normalise(data.get("doi", ""))
        citation = doi_lookup(
            doi=doi, resolver=settings.PORTAL_DOI_LOOKUP_URL,
            timeout_seconds=settings.PORTAL_DOI_LOOKUP_TIMEOUT_SECONDS,
        )  # fmt: skip
    except (DoiError, DoiLookupError) as error:
        form = OutputForm(data=data, instance=form.instance)
        form.full_clean()
        form.errors.pop("doi", None)
        form.add_error("doi", str(error))
        return form
    data.update({"kind": ResearchOutput.Kind.PUBLICATION, "doi": doi, "title": citation.title})
    data.update({"authors": citation.authors, "venue": citation.venue})
    data["year"] = str(citation.year or "")
    filled = OutputForm(initial=data.dict(), instance=form.instance)
    messages.info(request, f"Filled from {doi}: check the fields, then save.")
    return filled


@login_required
@require_http_methods(["GET", "POST"])
def output_new(request: HttpRequest, code: str) -> HttpResponse:
    """Add an output of any kind; with a resolver set, "Fill from DOI" first."""
    project = _project(request, code, edit=True)
    if request.method != "POST":
        form = OutputForm(initial={"kind": ResearchOutput.Kind.PUBLICATION})
        return _form_page(request, project, form, None)
    form = OutputForm(request.POST)
    if "lookup" in request.POST and settings.PORTAL_DOI_LOOKUP_URL:
        return _form_page(request, project, _filled_from_doi(request, form), None)
    if form.is_valid():
        try:
            output = output_add(project=project, actor=_me(request), details=form.details())
        except (OutputError, DoiError) as error:
            form.add_error(error.field if error.field in form.fields else None, str(error))
        else:
            messages.success(request, f"Added: {output}.")
            return _back(project)
    return _form_page(request, project, form, None)


@login_required
@require_http_methods(["GET", "POST"])
def output_edit(request: HttpRequest, code: str, pk: int) -> HttpResponse:
    project = _project(request, code, edit=True)
    output = get_object_or_404(ResearchOutput, project=project, pk=pk)
    if request.method != "POST":
        return _form_page(request, project, OutputForm(instance=output), output)
    form = OutputForm(request.POST, instance=output)
    if "lookup" in request.POST and settings.PORTAL_DOI_LOOKUP_URL:
        return _form_page(request, project, _filled_from_doi(request, form), output)
    if form.is_valid():
        # The form wrote its values onto ``output``: the service starts from the stored row.
        output.refresh_from_db()
        try:
            output_update(output=output, actor=_me(request), details=form.details())
        except (OutputError, DoiError) as error:
            form.add_error(error.field if error.field in form.fields else None, str(error))
        else:
            messages.success(request, f"Saved: {output}.")
            return _back(project)
    return _form_page(request, project, form, output)


@login_required
@require_POST
def output_delete_page(request: HttpRequest, code: str, pk: int) -> HttpResponse:
    project = _project(request, code, edit=True)
    output = get_object_or_404(ResearchOutput, project=project, pk=pk)
    output_delete(output=output, actor=_me(request))
    messages.success(request, f"Deleted: {output}.")
    return _back(project)


@login_required
@require_http_methods(["GET", "POST"])
def outputs_upload(request: HttpRequest, code: str) -> HttpResponse:
    """A BibTeX file: each entry becomes a publication; the entries left out are listed with
    their reason on the same page."""
    project = _project(request, code, edit=True)
    form = BibtexUploadForm(request.POST or None, request.FILES or None)
    result = None
    if request.method == "POST" and form.is_valid():
        try:
            result = outputs_import_bibtex(
                project=project, actor=_me(request), content=form.cleaned_data["file"]
            )
        except ApplicationError as error:
            form.add_error("file", str(error))
        else:
            added, left_out = len(result.added), len(result.problems)
            messages.success(request, f"Publications added: {added}; entries left out: {left_out}.")
    context = {"project": project, "form": form, "result": result}
    return render(request, "allocations/output_upload.html", context)


@login_required
@require_GET
def outputs_export_csv(request: HttpRequest, code: str) -> HttpResponse:
    """Every output of the project, one row each: for whoever may see the project."""
    project = _project(request, code, edit=False)
    rows = (
        (output, output.added_by.get_username(), output.added_at.isoformat())
        for output in outputs_since(project, None).select_related("added_by")
    )
    response = HttpResponse(outputs_csv(rows), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d")
    response["Content-Disposition"] = f'attachment; filename="{project.code}-outputs-{stamp}.csv"'
    return response


@login_required
@require_GET
def outputs_export_bibtex(request: HttpRequest, code: str) -> HttpResponse:
    """Every output of the project as BibTeX: for whoever may see the project."""
    project = _project(request, code, edit=False)
    text = outputs_bibtex(outputs_since(project, None), key_prefix=project.code)
    response = HttpResponse(text, content_type="application/x-bibtex; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d")
    response["Content-Disposition"] = f'attachment; filename="{project.code}-outputs-{stamp}.bib"'
    return response
