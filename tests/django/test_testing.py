"""anarchon_django.testing: a job run here, in the test's transaction, recorded."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import TestCase

from anarchon import RunRecord
from anarchon_django.control import runtime
from anarchon_django.testing import anarchon_run_job, run_job
from tests.django.testapp import jobs

__all__ = ["anarchon_run_job"]  # the fixture, as a conftest would get it from the plugin


class RunJobInATestCase(TestCase):
    """A plain Django ``TestCase``: the job sees the test's uncommitted rows."""

    def test_the_job_sees_the_tests_rows_and_is_recorded(self) -> None:
        User.objects.create(username="ada")
        jobs.CALLS.clear()
        record = run_job("count-users")
        assert record.status == "success", record.error
        assert jobs.CALLS == [{"job": "count-users", "users": 1}]
        assert (record.manual, record.reason, record.instance_id) == (True, "manual", "test")
        history = runtime.history("count-users", 5)
        assert [(r.status, r.slot) for r in history] == [("success", record.slot)]

    def test_a_failure_is_returned_not_raised(self) -> None:
        record = run_job("nightly-fail")
        assert record.status == "failure"
        assert record.error is not None and record.error.startswith("Traceback")
        assert record.error.endswith("RuntimeError: the report server said no")
        assert runtime.history("nightly-fail", 1)[0].error == record.error

    def test_unknown_jobs_are_named(self) -> None:
        with pytest.raises(LookupError, match=r"declared jobs: .*greet"):
            run_job("missing")


def test_the_pytest_fixture(anarchon_run_job: Callable[..., RunRecord]) -> None:
    jobs.CALLS.clear()
    record = anarchon_run_job("greet", {"n": 1})
    assert record.status == "success"
    assert jobs.CALLS == [{"job": "greet", "reason": "manual", "data": {"n": 1}}]
