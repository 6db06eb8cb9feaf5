"""A jobs module with a real import error: autodiscovery must not swallow it."""

from __future__ import annotations

import anarchon_django_no_such_module  # type: ignore[import-not-found]  # noqa: F401
