"""Deprecated alias, kept for one release: import
[`anarchon_django.settings.checks`][anarchon_django.settings.checks] instead. This module *is* that
module (the same object), so anything set on it is set there."""

import sys

from anarchon_django.settings import checks as _target
from anarchon_django.settings.checks import *  # noqa: F403 - the names, for type checkers

sys.modules[__name__] = _target
