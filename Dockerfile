# One image for every application service of docker-compose.yml: web, worker and beat.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PORTAL_VAR_DIR=/var/lib/portal
WORKDIR /app
COPY requirements.txt .
# python-ldap compiles against Debian's LDAP and SASL headers; only their runtime libraries stay.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        gcc libc6-dev libldap2-dev libsasl2-dev \
    && pip install --no-cache-dir -r requirements.txt \
    && apt-mark manual libldap-2.5-0 libsasl2-2 \
    && apt-get purge -y --auto-remove gcc libc6-dev libldap2-dev libsasl2-dev \
    && rm -rf /var/lib/apt/lists/*
COPY . .
RUN useradd --system --home /var/lib/portal portal && mkdir -p /var/lib/portal \
    && DJANGO_SECRET_KEY=build-only python manage.py collectstatic --noinput --verbosity 0 \
    && chown -R portal /var/lib/portal
USER portal
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "2", "--access-logfile", "-"]
