"""The example app: jobs (``jobs.py``), Celery tasks (``tasks.py``), Dramatiq actors
(``actors.py``)."""
