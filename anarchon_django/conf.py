"""Deprecated alias, kept for one release: import
[`anarchon_django.settings.conf`][anarchon_django.settings.conf] instead. This module *is* that
module (the same object), so anything set on it is set there."""

import sys

from anarchon_django.settings import conf as _target
from anarchon_django.settings.conf import *  # noqa: F403 - the names, for type checkers

sys.modules[__name__] = _target
