"""Deprecated alias, kept for one release: import
[`anarchon_django.control.runtime`][anarchon_django.control.runtime] instead. This module *is* that
module (the same object), so anything set on it is set there."""

import sys

from anarchon_django.control import runtime as _target
from anarchon_django.control.runtime import *  # noqa: F403 - the names, for type checkers

sys.modules[__name__] = _target
