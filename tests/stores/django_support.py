"""The ``"django"`` backend as a test store (conformance suites only): one migrated
alias per namespace, made by :mod:`tests.harness.django_stores`; importing the store
configures Django in the test process, so only the ``django_*`` store modules import
this, lazily. The session end drops the schemas and databases (``purge``)."""

from __future__ import annotations

from tests.harness.django_stores import admin, drop, prepare, server_config, server_url, unavailable

__all__ = ["admin", "drop", "prepare", "server_config", "server_url", "unavailable"]
