"""No asyncio noise at exit (issue 34, 7b): a program that only reads (``history()``,
``jobs()``) through a ``Scheduler`` it never started, then exits without ``close()``,
prints nothing on stderr: the pools its reads opened are closed at exit on their loop
(``anarchon.engine.sync_scheduler._close_at_exit``), so no "Task was destroyed but it is
pending!"."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.stores import StoreSpec

PROGRAM = textwrap.dedent("""
    import sys
    from anarchon import Scheduler, from_url
    scheduler = Scheduler(from_url(sys.argv[1]))
    scheduler.every("job", "1h", lambda ctx: None)
    print(len(scheduler.history("job")), len(scheduler.jobs()))
""")


def test_reads_without_start_exit_quietly(lease_store: StoreSpec, namespace: str) -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM, lease_store.url_for(namespace)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1"], done.stdout
    assert done.stderr == "", done.stderr
