"""The Redis/Valkey key layout.

Every key of one job starts with the hash tag ``{<prefix>:<job>}``, so all of them share a
Redis Cluster slot and each script's keys are passed in ``KEYS``. Characters that would
break the tag or the key layout (``{ } : %``) are percent-escaped in the job name, so the
job part holds no ``:`` and the last ``:`` of a tag ends the prefix: two different
``(prefix, job)`` pairs never share a key.

The namespace's control keys (the index of every job's control record, the generation,
the handler offers) have the tag ``{<prefix>triggers}``. A key without braces is hashed
whole, so they share the Cluster slot of the trigger list ``<prefix>triggers`` and one
script takes the triggers and reads the generation. A job tag can spell that tag too
(prefix ``cron`` with job ``triggers`` against prefix ``cron:``), so these keys' suffixes
start with ``ns-``, which no job key's does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BAD_PREFIX = re.compile(r"[{}*?\[\]\\\s\x00]")
_ESCAPES = {"%": "%25", "{": "%7B", "}": "%7D", ":": "%3A"}
_ESCAPE_RE = re.compile("[%{}:]")


def check_prefix(prefix: object) -> str:
    """Validate a key prefix: refuse characters that would break key patterns or tags."""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}: {prefix!r}")
    if not prefix:
        raise ValueError("invalid prefix '': it must not be empty (every key of a namespace "
                         "starts with it; the default is 'cron:')")
    if _BAD_PREFIX.search(prefix):
        raise ValueError(f"invalid prefix {prefix!r}: it must not contain whitespace or any "
                         "of { } * ? [ ] \\ (they break hash tags and key patterns)")
    if len(prefix) > 100:
        raise ValueError(f"invalid prefix {prefix!r}: at most 100 characters")
    return prefix


def escape_name(name: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group()], name)


@dataclass(frozen=True)
class JobKeys:
    """The keys of one job; they all share the hash tag ``{<prefix>:<job>}``."""

    tag: str

    @property
    def runs(self) -> str:
        return f"{self.tag}:runs"

    @property
    def active(self) -> str:
        return f"{self.tag}:active"

    @property
    def done(self) -> str:
        return f"{self.tag}:done"

    @property
    def att(self) -> str:
        return f"{self.tag}:att"

    @property
    def hist(self) -> str:
        return f"{self.tag}:hist"

    @property
    def skips(self) -> str:
        """Zset of the skip records' fields in ``att`` (``"<slot>:0"``), scored by when
        they were written: bounded apart from the attempts in ``hist``."""
        return f"{self.tag}:skips"

    @property
    def stream(self) -> str:
        return f"{self.tag}:stream"

    @property
    def seen(self) -> str:
        return f"{self.tag}:seen"

    @property
    def control(self) -> str:
        """Hash ``v -> version, t -> text``: the job's control record, which the claim
        scripts read for the version fence."""
        return f"{self.tag}:control"

    @property
    def changes(self) -> str:
        """List of the job's change-log entries (JSON), newest first."""
        return f"{self.tag}:changes"

    @property
    def values(self) -> str:
        """Hash ``field -> value``: the job's shared values."""
        return f"{self.tag}:values"

    @property
    def every_key(self) -> tuple[str, ...]:
        """All of the job's keys (for purging a namespace)."""
        return (self.runs, self.active, self.done, self.att, self.hist, self.skips,
                self.stream, self.seen, self.control, self.changes, self.values)


@dataclass(frozen=True)
class NamespaceKeys:
    """The namespace's control keys, in the Cluster slot of the trigger list
    ``triggers`` (``<prefix>triggers``)."""

    triggers: str

    @property
    def tag(self) -> str:
        return "{" + self.triggers + "}"

    @property
    def index(self) -> str:
        """Hash ``job name -> "<version>:<text>"``: a copy of every job's record."""
        return f"{self.tag}:ns-control"

    @property
    def generation(self) -> str:
        """Integer raised by every control change."""
        return f"{self.tag}:ns-generation"

    @property
    def offers(self) -> str:
        """Hash ``instance id -> "<server ms>:<JSON list of handler names>"``."""
        return f"{self.tag}:ns-offers"

    @property
    def instances(self) -> str:
        """Hash ``instance id -> "<last seen ms>:<expires ms>:<JSON record>"``: the
        liveness records (``anarchon.backends.liveness``)."""
        return f"{self.tag}:ns-instances"

    @property
    def instances_expiry(self) -> str:
        """Zset ``instance id -> expires ms``: which records to delete when long dead."""
        return f"{self.tag}:ns-instances-expiry"

    @property
    def every_key(self) -> tuple[str, ...]:
        """All of the namespace's control keys (for purging)."""
        return (self.index, self.generation, self.offers, self.instances,
                self.instances_expiry)
