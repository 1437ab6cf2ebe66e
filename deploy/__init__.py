"""How the portal is served: gunicorn behind nginx (docs/configuration.md, "Web tier")."""
