# One image for every application service of docker-compose.yml: web, worker and beat.
FROM python:3.11-slim-bookworm
# Static files collected with hashed names and gzipped (docs/configuration.md, "Static files").
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PORTAL_VAR_DIR=/var/lib/portal \
    PORTAL_STATIC_COLLECTED=1
WORKDIR /app
COPY requirements.txt requirements-ldap.txt ./
RUN pip install --no-cache-dir -r requirements.txt
# LDAP sign-in (requirements-ldap.txt) is in the image unless built with PORTAL_LDAP=0
# (docker-compose.yml passes it on): a centre image usually wants it. python-ldap compiles
# against Debian's LDAP and SASL headers; only their runtime libraries stay.
ARG PORTAL_LDAP=1
RUN if [ "$PORTAL_LDAP" = 1 ]; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            gcc libc6-dev libldap2-dev libsasl2-dev \
        && pip install --no-cache-dir -r requirements.txt -r requirements-ldap.txt \
        && apt-mark manual libldap-2.5-0 libsasl2-2 \
        && apt-get purge -y --auto-remove gcc libc6-dev libldap2-dev libsasl2-dev \
        && rm -rf /var/lib/apt/lists/*; \
    fi
COPY . .
# uploads/ exists in the image, owned by portal, so the volume docker-compose.yml mounts there
# starts out writable by the web and the worker.
RUN useradd --system --home /var/lib/portal portal && mkdir -p /var/lib/portal/uploads \
    && DJANGO_SECRET_KEY=build-only python manage.py collectstatic --noinput --verbosity 0 \
    && chown -R portal /var/lib/portal
USER portal
# For nginx only (docker-compose.yml's nginx service, deploy/nginx.conf.template): sync
# workers must not face clients directly.
EXPOSE 8000
CMD ["gunicorn", "-c", "deploy/gunicorn.conf.py", "--bind", "0.0.0.0:8000", "portal.wsgi"]
