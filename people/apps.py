from django.apps import AppConfig


class PeopleConfig(AppConfig):
    name = "people"
    verbose_name = "People and sign-in"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.signals import user_logged_in
        from django.db.models.signals import post_save

        from people import schema  # noqa: F401 (registers the token scheme with the schema)
        from people.ldap import ldap_signals_connect
        from people.lockout import failures_forgive_on_sign_in
        from people.passwords import password_changed_revoke_tokens

        user_logged_in.connect(failures_forgive_on_sign_in, dispatch_uid="people.forgive")
        post_save.connect(
            password_changed_revoke_tokens,
            sender=get_user_model(),
            dispatch_uid="people.password_changed_revoke_tokens",
        )

        ldap_signals_connect()  # only where django-auth-ldap is installed (requirements-ldap.txt)
