"""Jobs: their definition and checks, the registry of a scheduler, named schedulers.

Internal: the public entry points are the schedulers' ``every``/``cron``/``at``/``job``
methods and ``anarchon.every``/``cron``/``at``/``configure``/``get_scheduler``.
"""
