"""Importers of other beat schedulers' entries (redbeat, django-celery-beat)."""
