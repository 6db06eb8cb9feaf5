"""anarchon's lab: code that measures anarchon, not code that runs jobs.

* ``anarchon_lab.scenarios``: the scenario runner (``anarchon scenarios``,
  ``python -m anarchon_lab.scenarios``) with its two deliberately naive stores;
* ``anarchon_lab.redis_strategies``: the claim-only Redis/Valkey comparison strategies
  (``stream-id``, ``script``, ``idmp``), reached through
  ``anarchon.backends.redis.comparison_backend()`` or ``from_url("redis://…?strategy=…&lab=1")``.

A separate distribution (``lab/`` in the anarchon repository: ``pip install -e lab/``);
anarchon finds its parts through the ``anarchon.lab`` entry-point group.
"""
