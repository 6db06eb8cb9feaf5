"""Helpers for a project's own tests of its jobs.

```python
from anarchon_django.testing import run_job

class NightlyTests(TestCase):
    def test_nightly(self):
        Order.objects.create(...)
        record = run_job("nightly")          # here, now, in this test's transaction
        assert record.status == "success", record.error
```

``run_job()`` calls the declared handler in the calling thread (an ``async`` handler
through ``async_to_sync``), so the handler sees the test's uncommitted rows and its
writes are rolled back with the test. With the ``"django"`` backend the attempt is
recorded in the store's history (reason ``manual``, instance ``"test"``) through the same
connection; nothing else is touched: no scheduler, no thread, no lock.

For pytest (pytest-django), add ``pytest_plugins = ["anarchon_django.testing"]`` to your
``conftest.py`` and use the ``anarchon_run_job`` fixture (it enables database access).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync

from anarchon import AbortSignal, RunContext, RunRecord
from anarchon.schedules.kinds import ms_to_datetime
from anarchon.tracebacks import describe

#: the instance id ``run_job`` records
INSTANCE = "test"


def run_job(name: str, data: Any = None) -> RunRecord:
    """Run job ``name`` once, synchronously, here; return its record.

    Failures do not raise: the record has ``status="failure"`` and ``error``, the
    traceback as history keeps it (``anarchon.tracebacks.describe()``; its last line
    is the exception's). Unknown names raise ``LookupError``.
    """
    from anarchon_django.control import direct, runtime

    declarations = {d.name: d for d in runtime.all_declarations()}
    if name not in declarations:
        raise LookupError(f"unknown job {name!r}; declared jobs: "
                          f"{', '.join(sorted(declarations)) or 'none'}")
    store = direct.store_of(runtime.get_scheduler())
    started = store.now() if store is not None else int(time.time() * 1000)
    token = store.start_manual(name, INSTANCE, started) if store is not None else None
    ctx = RunContext(name=name, slot=started, scheduled_at=ms_to_datetime(started),
                     instance_id=INSTANCE, manual=True, attempt=1, reason="manual",
                     signal=AbortSignal(), data=data)
    handler = declarations[name].handler
    error: str | None = None
    try:
        if inspect.iscoroutinefunction(handler):
            async_to_sync(handler)(ctx)
        else:
            handler(ctx)
    except Exception as exc:  # the record says how the run ended, as in a real run
        error = describe(exc)
    status: Any = "failure" if error else "success"
    finished = store.now() if store is not None else int(time.time() * 1000)
    if store is not None and token is not None:
        store.finish_manual(token, status, error,
                           int(declarations[name].options.get("history_size", 100)), None)
    return RunRecord(name, started, ms_to_datetime(started), INSTANCE, True, 1, "manual",
                     status, ms_to_datetime(started), ms_to_datetime(finished),
                     (finished - started) / 1000, error)


try:
    import pytest
except ImportError:  # pragma: no cover - pytest is only needed for the fixture
    pass
else:
    @pytest.fixture
    def anarchon_run_job(db: None) -> Callable[..., RunRecord]:
        """``run_job()``, with database access for the test (pytest-django's ``db``)."""
        return run_job
