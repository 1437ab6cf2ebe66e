from django.urls import path

from allocations import member_pages, project_pages, project_staff_pages
from allocations.grants import pages as grant_pages
from allocations.outputs import pages as output_pages
from allocations.pools import staff_pages as pool_staff_pages
from allocations.priorities import pages as priority_pages
from allocations.project_requests import pages as project_request_pages
from allocations.rounds import pages
from allocations.rounds import staff_pages as round_staff_pages
from allocations.slurm import enforcement_pages
from allocations.slurm import pages as slurm_pages

app_name = "allocations"

urlpatterns = [
    # Rate drafts (staff): a rate change seen before it ships
    path("clusters/<slug:name>/rate-drafts/", grant_pages.rate_drafts, name="rate-drafts"),
    path("rate-drafts/<int:pk>/", grant_pages.rate_draft, name="rate-draft"),
    path("enforcement/", enforcement_pages.enforcement_list, name="enforcement-list"),
    path("enforcement/<int:pk>/", enforcement_pages.enforcement_decide, name="enforcement-decide"),
    # Slurm provisioning (staff)
    path("slurm/", slurm_pages.slurm_sync_page, name="slurm-sync"),
    path(
        "slurm/plans/<int:pk>/approve/",
        slurm_pages.slurm_sync_approve_page,
        name="slurm-sync-approve",
    ),
    path(
        "slurm/<slug:cluster>/refresh/",
        slurm_pages.slurm_sync_refresh_page,
        name="slurm-sync-refresh",
    ),
    # Dynamic priority (staff)
    path("priorities/", priority_pages.priorities, name="priorities"),
    path("priorities/<slug:cluster>/policy/", priority_pages.policy_set, name="priority-policy"),
    path(
        "priorities/<slug:cluster>/coefficients/",
        priority_pages.coefficient_post,
        name="priority-coefficient",
    ),
    path(
        "priorities/<slug:cluster>/coefficients/csv/",
        priority_pages.coefficients_upload,
        name="priority-upload",
    ),
    path(
        "priorities/<slug:cluster>/propose/",
        priority_pages.actions_propose,
        name="priority-propose",
    ),
    path(
        "priorities/actions/<int:pk>/",
        priority_pages.action_decide,
        name="priority-action-decide",
    ),
    # Projects, requests and rounds
    path("projects/<str:code>/", project_pages.project_detail, name="project-detail"),
    path("projects/<str:code>/requests/new/", pages.request_new, name="request-new"),
    path(
        "projects/<str:code>/unarchive/",
        project_pages.project_unarchive_page,
        name="project-unarchive",
    ),
    path(
        "projects/<str:code>/invitations/",
        member_pages.invitation_send_page,
        name="invitation-send",
    ),
    path(
        "projects/<str:code>/invitations/<int:pk>/revoke/",
        member_pages.invitation_revoke_page,
        name="invitation-revoke",
    ),
    path(
        "projects/<str:code>/members/<str:username>/role/",
        member_pages.member_role_page,
        name="member-role",
    ),
    path(
        "projects/<str:code>/members/<str:username>/remove/",
        member_pages.member_remove_page,
        name="member-remove",
    ),
    # Research outputs of a project (docs/allocations.md, "Research outputs")
    path("projects/<str:code>/outputs/new/", output_pages.output_new, name="output-new"),
    path("projects/<str:code>/outputs/upload/", output_pages.outputs_upload, name="output-upload"),
    path(
        "projects/<str:code>/outputs/export.csv",
        output_pages.outputs_export_csv,
        name="output-export-csv",
    ),
    path(
        "projects/<str:code>/outputs/export.bib",
        output_pages.outputs_export_bibtex,
        name="output-export-bibtex",
    ),
    path(
        "projects/<str:code>/outputs/<int:pk>/edit/", output_pages.output_edit, name="output-edit"
    ),
    path(
        "projects/<str:code>/outputs/<int:pk>/delete/",
        output_pages.output_delete_page,
        name="output-delete",
    ),
    path("invitations/<str:token>/", member_pages.invitation_page, name="invitation"),
    path("requests/<int:pk>/", pages.request_detail, name="request-detail"),
    path("requests/<int:pk>/edit/", pages.request_edit, name="request-edit"),
    path("requests/<int:pk>/estimate/", pages.request_estimate, name="request-estimate"),
    path("requests/<int:pk>/submit/", pages.request_submit_view, name="request-submit"),
    path(
        "requests/<int:pk>/progress-report/",
        pages.request_progress_report,
        name="request-progress-report",
    ),
    path("requests/<int:pk>/letter.pdf", pages.request_letter, name="request-letter"),
    path(
        "requests/<int:pk>/start-review/", pages.request_start_review, name="request-start-review"
    ),
    path("requests/<int:pk>/review/", pages.review, name="request-review"),
    path(
        "requests/<int:pk>/assignments/",
        pages.request_assignments_view,
        name="request-assignments",
    ),
    path("requests/<int:pk>/grant/", pages.grant, name="request-grant"),
    # Project requests: anyone asks for a new project; approvers decide
    path(
        "project-requests/", project_request_pages.project_request_list, name="project-request-list"
    ),
    path(
        "project-requests/new/",
        project_request_pages.project_request_new,
        name="project-request-new",
    ),
    path(
        "project-requests/queue/",
        project_request_pages.project_request_queue,
        name="project-request-queue",
    ),
    path(
        "project-requests/<int:pk>/",
        project_request_pages.project_request_detail,
        name="project-request-detail",
    ),
    path(
        "project-requests/<int:pk>/confirm/",
        project_request_pages.project_request_confirm,
        name="project-request-confirm",
    ),
    path(
        "project-requests/<int:pk>/edit/",
        project_request_pages.project_request_edit,
        name="project-request-edit",
    ),
    path(
        "project-requests/<int:pk>/decide/",
        project_request_pages.project_request_decide,
        name="project-request-decide",
    ),
    path("rounds/", pages.round_list, name="round-list"),
    path("rounds/<int:pk>/", pages.round_detail, name="round-detail"),
    path("rounds/<int:pk>/what-if/", pages.round_what_if, name="round-what-if"),
    path(
        "rounds/<int:pk>/what-if/<int:draft>/",
        pages.round_what_if_draft,
        name="round-what-if-draft",
    ),
    path(
        "rounds/<int:pk>/what-if/<int:draft>/proposals/<int:proposal>/",
        pages.round_what_if_proposal,
        name="round-what-if-proposal",
    ),
    path(
        "rounds/<int:pk>/what-if/<int:draft>/apply/",
        pages.round_what_if_apply,
        name="round-what-if-apply",
    ),
    # Staff's projects, pools and rounds (docs/allocations.md, "Staff work in the portal")
    path("staff/projects/", project_staff_pages.staff_projects, name="staff-projects"),
    path("staff/projects/new/", project_staff_pages.staff_project_new, name="staff-project-new"),
    path(
        "staff/projects/<str:code>/",
        project_staff_pages.staff_project_edit,
        name="staff-project-edit",
    ),
    path(
        "staff/projects/<str:code>/members/",
        project_staff_pages.staff_member_add,
        name="staff-member-add",
    ),
    path(
        "staff/projects/<str:code>/members/<str:username>/remove/",
        project_staff_pages.staff_member_remove,
        name="staff-member-remove",
    ),
    path("staff/pools/", pool_staff_pages.staff_pools, name="staff-pools"),
    path("staff/pools/new/", pool_staff_pages.staff_pool_new, name="staff-pool-new"),
    path("staff/pools/<int:pk>/", pool_staff_pages.staff_pool_edit, name="staff-pool-edit"),
    path("staff/rounds/", round_staff_pages.staff_rounds, name="staff-rounds"),
    path("staff/rounds/new/", round_staff_pages.staff_round_new, name="staff-round-new"),
    path("staff/rounds/<int:pk>/", round_staff_pages.staff_round_edit, name="staff-round-edit"),
    path(
        "staff/rounds/<int:pk>/close/",
        round_staff_pages.staff_round_close,
        name="staff-round-close",
    ),
    path(
        "staff/rounds/<int:pk>/committee/",
        round_staff_pages.staff_committee_add,
        name="staff-committee-add",
    ),
    path(
        "staff/rounds/<int:pk>/committee/<str:username>/remove/",
        round_staff_pages.staff_committee_remove,
        name="staff-committee-remove",
    ),
]
