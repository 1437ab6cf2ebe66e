from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from people.models import ApiToken
from people.tokens import token_revoke

SHOWN = ("name", "user", "prefix", "scope", "created_at", "expires_at", "last_used_at",
         "revoked_at")  # fmt: skip


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Staff see every token (never its value: only a digest is stored) and revoke them."""

    list_display = SHOWN
    list_filter = ["scope"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = SHOWN
    exclude = ["digest"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a token is made by its owner, who alone sees it

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            token_revoke(token=token)
