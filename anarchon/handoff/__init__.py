"""The hand-off: a won slot turned into a task-queue message, the same way for every
framework layer (``anarchon_celery``, ``anarchon_dramatiq``); each layer implements only
its ``send``. Nothing here imports a framework.

- [`headers`][anarchon.handoff.headers]: the ``anarchon_*`` headers of a run.
- [`fence`][anarchon.handoff.fence]: the lease check immediately before each send.
- [`retry`][anarchon.handoff.retry]: a failed send retried with backoff until ``max_late``.
- [`options`][anarchon.handoff.options]: the option vocabulary (``track``, ``resend``,
  ``queue_lease``) and its deprecated aliases.
- [`per_process`][anarchon.handoff.per_process]: a fork-safe holder of one object per
  process (the workers' trackers).
- [`sender`][anarchon.handoff.sender]: the whole sequence, won slot to message, that a
  layer subclasses (implementing its message and its ``send``).
- [`outcomes`][anarchon.handoff.outcomes]: the watch that reports a tracked message whose
  outcome never arrives.
"""

from .fence import ensure_lease, send_margin
from .headers import run_headers
from .options import RENAMED, canonical_options
from .outcomes import MissingOutcome, OutcomeWatch
from .per_process import PerProcess
from .retry import send_until_late
from .sender import Handoff

__all__ = ["Handoff", "MissingOutcome", "OutcomeWatch", "PerProcess", "RENAMED",
           "canonical_options", "ensure_lease", "run_headers", "send_margin",
           "send_until_late"]
