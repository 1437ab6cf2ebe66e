# One image for every application service of docker-compose.yml: web, worker and beat.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PORTAL_VAR_DIR=/var/lib/portal
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
RUN useradd --system --home /var/lib/portal portal && mkdir -p /var/lib/portal \
    && DJANGO_SECRET_KEY=build-only python manage.py collectstatic --noinput --verbosity 0 \
    && chown -R portal /var/lib/portal
USER portal
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "2", "--access-logfile", "-"]
