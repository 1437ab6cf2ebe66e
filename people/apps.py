from django.apps import AppConfig


class PeopleConfig(AppConfig):
    name = "people"
    verbose_name = "People and sign-in"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from people import schema  # noqa: F401 (registers the token scheme with the schema)
        from people.ldap import ldap_signals_connect
        from people.lockout import failures_forgive_on_sign_in

        user_logged_in.connect(failures_forgive_on_sign_in, dispatch_uid="people.forgive")

        ldap_signals_connect()  # only where django-auth-ldap is installed (requirements-ldap.txt)
