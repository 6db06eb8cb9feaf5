"""Definition drift: live beats that disagree on an entry's definition say so.

During a rolling deploy old and new beats run side by side; an entry changed between the
two versions then runs on both definitions (each beat schedules what it has, and the
store only keeps slots from being published twice). Each beat records a fingerprint of
every entry's definition (task, schedule, args, kwargs, options) in the store: one shared
document of the live beats, refreshed by compare-and-set every ``period`` seconds, beats
not seen for three periods dropped. When live beats disagree on an entry, each logs a
WARNING naming the entry and both definitions (once per pair), and re-registers the
entry so that ``anarchon jobs`` shows ``DRIFT`` with the number of definitions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from anarchon.backends.base import JobSpec
from anarchon_celery.beat.config import FRAMEWORK
from anarchon_celery.beat.loop import BackgroundLoop
from anarchon_celery.beat.shared import Values

logger = logging.getLogger("anarchon.celery")

#: where the live beats' fingerprints are kept (not a job: no slot, no history)
DOC_NAME, DOC_FIELD = "celery.beat", "celery_definitions"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SWAP_TRIES = 8


def definition_text(entry: Any) -> str:
    """An entry's definition as one line, the same in every process that has it."""
    fields = {"task": entry.task, "schedule": repr(entry.schedule),
              "args": repr(tuple(entry.args or ())),
              "kwargs": repr(sorted((entry.kwargs or {}).items())),
              "options": json.dumps(entry.options or {}, sort_keys=True, default=repr)}
    text = " ".join(f"{k}={v}" for k, v in fields.items())
    return _ADDRESS.sub("", text)  # default reprs carry a per-process address


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class DriftWatch(BackgroundLoop):
    """Publishes this beat's fingerprints and compares them with the live beats'."""

    thread_name = "anarchon-celery-drift"

    def __init__(self, values: Values, instance_id: str, entries: Mapping[str, Any],
                 describe: Mapping[str, str], announce: Callable[[list[JobSpec]], None],
                 kinds: Mapping[str, str], period: float) -> None:
        super().__init__()
        self.values = values
        self.instance_id = instance_id
        self.texts = {name: definition_text(entry) for name, entry in entries.items()}
        self.fps = {name: fingerprint(text) for name, text in self.texts.items()}
        self.describe = describe
        self.kinds = kinds
        self.announce = announce
        self.period = period
        self._warned: set[tuple[str, str]] = set()
        self._drifting: set[str] = set()

    def _run(self) -> None:
        for name, text in self.texts.items():  # each definition's text, once
            try:
                self.values.swap_value(name, f"{DOC_FIELD}:{self.fps[name]}", None, text)
            except Exception as exc:
                logger.debug("anarchon_celery: definition of %r not recorded: %s", name, exc)
        while not self._stop.is_set():
            try:
                self.compare(self.refresh())
            except Exception as exc:  # the store is down: the next period tries again
                logger.debug("anarchon_celery: definitions not compared: %s", exc)
            self._stop.wait(self.period)

    def refresh(self) -> dict[str, Any]:
        """Put this beat's fingerprints in the shared document; returns the document."""
        for _ in range(_SWAP_TRIES):
            raw = self.values.read_value(DOC_NAME, DOC_FIELD)
            doc: dict[str, Any] = json.loads(raw) if raw else {}
            now = time.time()
            doc = {beat: seen for beat, seen in doc.items()
                   if now - float(seen.get("seen", 0)) < 3 * self.period}
            doc[self.instance_id] = {"seen": now, "fps": self.fps}
            if self.values.swap_value(DOC_NAME, DOC_FIELD, raw, json.dumps(doc)):
                return doc
        raise RuntimeError("the live beats' document kept changing")

    def compare(self, doc: Mapping[str, Any]) -> None:
        """Warn about each entry whose live beats hold another definition."""
        drifting: dict[str, set[str]] = {}
        for beat, seen in doc.items():
            if beat == self.instance_id:
                continue
            for name, fp in dict(seen.get("fps", {})).items():
                if name in self.fps and fp != self.fps[name]:
                    drifting.setdefault(name, {self.fps[name]}).add(fp)
                    self._warn(name, beat, fp)
        changed = set(drifting) ^ self._drifting
        self._drifting = set(drifting)
        specs = [JobSpec(name, self.kinds.get(name, "cron"),
                         self.describe.get(name, "?") + (
                             f" (DRIFT: live beats hold {len(drifting[name])} definitions)"
                             if name in drifting else ""), FRAMEWORK)
                 for name in sorted(changed)]
        if specs:
            self.announce(specs)

    def _warn(self, name: str, beat: str, fp: str) -> None:
        if (name, fp) in self._warned:
            return
        self._warned.add((name, fp))
        other = self.values.read_value(name, f"{DOC_FIELD}:{fp}") or f"fingerprint {fp}"
        logger.warning("beat entry %r: live beats disagree on its definition; this beat (%s) "
                       "has %s; beat %s has %s. Until every beat runs one definition, "
                       "both are scheduled", name, self.instance_id, self.texts[name],
                       beat, other)


__all__ = ["DOC_FIELD", "DOC_NAME", "DriftWatch", "definition_text", "fingerprint"]
