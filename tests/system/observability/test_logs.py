"""Logs that tell the story: a real process with ``logging.basicConfig(level=INFO)`` and
no listener logs a failed run at ERROR with its traceback and the ``anarchon_*`` fields,
and a job whose slots keep overlapping one WARNING (docs/operations.md, *Logging*)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from anarchon import Scheduler
from anarchon.backends.sqlite import SqliteBackend
from anarchon.observability.logs import PERSIST_AFTER
from tests.harness.examples import ROOT, example_env

PROGRAM = Path(__file__).with_name("logging_program.py")


def test_failure_error_with_traceback_and_fields_and_persisting_skips(tmp_path: Path) -> None:
    database = str(tmp_path / "jobs.db")
    proc = subprocess.run([sys.executable, str(PROGRAM), database], cwd=ROOT,
                          env=example_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    records: list[dict[str, Any]] = [json.loads(line) for line in proc.stdout.splitlines()]
    failures = [r for r in records if r["logger"] == "anarchon.runs" and r["level"] == "ERROR"]
    assert failures, proc.stderr
    for record in failures:
        assert record["traceback"]
        assert record["anarchon_job"] == "boom"
        assert record["anarchon_attempt"] == 1
        assert record["anarchon_instance"] == "logs-1"
        assert isinstance(record["anarchon_slot"], int)
    # basicConfig's handler shows them too, traceback included
    assert "ERROR:anarchon.runs:job 'boom'" in proc.stderr
    assert "Traceback (most recent call last)" in proc.stderr
    assert 'raise ValueError("kaput")' in proc.stderr
    # every failure in history was logged, with its slot
    history = Scheduler(backend=SqliteBackend(database=database)).history("boom", 100)
    failed_slots = {r.slot for r in history if r.status == "failure"}
    assert failed_slots == {r["anarchon_slot"] for r in failures}
    assert len(failures) == len(failed_slots)
    skips = [r for r in records if r["logger"] == "anarchon.skips"]
    overlaps = [r for r in skips if r["level"] == "INFO" and "overlap" in r["message"]]
    warnings = [r for r in skips if r["level"] == "WARNING"]
    assert len(overlaps) >= PERSIST_AFTER and len(warnings) == 1
    assert warnings[0]["anarchon_job"] == "slow"
    assert all(r["anarchon_instance"] == "logs-1" for r in records
               if r["logger"] != "anarchon" or "scheduler" in r["message"])
