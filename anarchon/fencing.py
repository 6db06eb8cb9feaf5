"""Deprecated alias, kept for one release: import
[`anarchon.handoff.fence`][anarchon.handoff.fence] instead. This module *is* that module
(the same object)."""

import sys

from .handoff import fence as _target
from .handoff.fence import *  # noqa: F403 - the names, for type checkers

sys.modules[__name__] = _target
