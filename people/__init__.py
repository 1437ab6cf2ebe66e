"""People: how a person signs in (SSO, LDAP, passwords), the roles their identity provider
gives them, and the API tokens they manage."""
