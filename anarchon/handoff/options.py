"""The hand-off's option vocabulary, one name each in every framework layer:

- ``track``: leave the run open when the message is sent; the worker records the real
  outcome (before: Celery's ``track_outcomes``).
- ``resend``: with ``track``, send the slot again (attempt 2, 3 …) when no worker took
  the run over within ``queue_lease`` (before: Celery's ``republish``).
- ``queue_lease``: how long a tracked message may wait in the queue.

The old names keep working for one release as deprecated aliases: each use warns
(``DeprecationWarning``) and means the new name; giving both is an error.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

#: deprecated name -> its name now
RENAMED: Mapping[str, str] = {"track_outcomes": "track", "republish": "resend"}


def canonical_options(options: Mapping[str, Any], where: str, *, prefix: str = "",
                      stacklevel: int = 3) -> dict[str, Any]:
    """``options`` with each deprecated name (``prefix`` + old) replaced by its new name
    (``prefix`` + new), warning once per use; ``where`` names what was configured.
    Raises ``ValueError`` when an old name and its new name are both given."""
    result = dict(options)
    for old, new in RENAMED.items():
        old_key, new_key = prefix + old, prefix + new
        if old_key not in result:
            continue
        if new_key in result:
            raise ValueError(f"{where}: {old_key!r} and {new_key!r} are the same option "
                             f"({old_key!r} is its deprecated name); give only {new_key!r}")
        deprecated_alias(where, old_key, new_key, stacklevel=stacklevel + 1)
        result[new_key] = result.pop(old_key)
    return result




def deprecated_alias(where: str, old: str, new: str | None = None,
                     stacklevel: int = 3) -> None:
    """Warn that ``old`` (in ``where``) is the deprecated name of ``new`` (default: its
    entry in [`RENAMED`][anarchon.handoff.options.RENAMED])."""
    warnings.warn(f"{where}: {old!r} is deprecated, use {new or RENAMED[old]!r}",
                  DeprecationWarning, stacklevel=stacklevel)


__all__ = ["RENAMED", "canonical_options", "deprecated_alias"]
