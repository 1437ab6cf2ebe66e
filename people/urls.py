from django.urls import path

from people import pages

app_name = "people"

urlpatterns = [
    path("tokens/", pages.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", pages.token_revoke_page, name="token-revoke"),
    path("notifications/", pages.notifications, name="notifications"),
]
