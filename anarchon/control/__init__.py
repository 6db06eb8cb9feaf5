"""Runtime control: pause, resume, reschedule, dynamic jobs and manual triggers.

What a control record means (``changes``), who writes it (``runtime``), how a running
instance applies it (``controls``), trigger requests and their inbox, and the periodic
re-registration of jobs. Internal: the public entry points are methods of the schedulers
and ``anarchon.Change``.
"""
