"""Where anarchon's settings come from in a Celery app.

Celery config keys (docs/contract.md, *Framework surfaces*): ``anarchon_backend`` (URL or
backend object), ``anarchon_options`` (dict for the backend: prefix, table …),
``anarchon_scheduler`` (dict of scheduler options: lease, heartbeat, jitter …), plus this
package's own ``anarchon_track`` (bool), ``anarchon_queue_lease`` (duration),
``anarchon_resend`` (bool: publish a tracked slot again when no outcome came) and
``anarchon_stop_timeout`` (duration); ``anarchon_track_outcomes`` and
``anarchon_republish`` are the deprecated names of ``anarchon_track`` and
``anarchon_resend`` (``anarchon.handoff.options``). Under Django's ``CELERY_`` namespace
the same keys are upper-cased. When none of them is set and Django is configured, Django's
``ANARCHON`` setting is read (keys ``BACKEND``, ``OPTIONS``, ``SCHEDULER``, any case), and
a ``BACKEND`` given by name (``"django"``: the ORM store) is built by anarchon_django.
With nothing set and a Redis broker, the broker's Redis is used with its own prefix
``anarchon:`` and the broker's connection settings (see ``anarchon_celery.beat.broker``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from anarchon import Backend, from_url, parse_duration
from anarchon.handoff.options import RENAMED, deprecated_alias
from anarchon.observability import port_from
from anarchon_celery.beat.broker import BrokerStoreError, broker_store_url

DEFAULT_PREFIX = "anarchon:"
#: what ``JobInfo.framework`` says of the jobs of beat entries (``anarchon list``, admin)
FRAMEWORK = "celery"
#: ``Settings.source`` of a store read from Django's ``ANARCHON`` setting
DJANGO_SOURCE = "settings.ANARCHON"


class ConfigurationError(ValueError):
    """anarchon_celery cannot find or understand its settings."""


@dataclass(frozen=True)
class Settings:
    """anarchon settings of one Celery app, resolved but not connected."""

    #: a URL or a backend object
    backend: str | Backend
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    scheduler_options: Mapping[str, Any] = field(default_factory=dict)
    #: record the worker's real outcome (``anarchon_track``)
    track: bool = False
    queue_lease: float = 600.0
    #: with tracking: publish attempt 2, 3 … when no worker reported within queue_lease
    #: (a task still queued then runs twice) or the worker running it was lost
    resend: bool = False
    stop_timeout: float = 30.0
    #: Prometheus metrics (``anarchon_metrics``) and the port of ``/metrics`` on the beat
    #: (``anarchon_metrics_port``; beat reads ``ANARCHON_METRICS_PORT`` when it is unset)
    metrics: bool = False
    metrics_port: int | None = None
    #: where the backend came from, for the beat banner
    source: str = "anarchon_backend"

    @property
    def track_outcomes(self) -> bool:
        """Deprecated name of ``track``."""
        deprecated_alias("anarchon_celery.Settings", "track_outcomes")
        return self.track

    @property
    def republish(self) -> bool:
        """Deprecated name of ``resend``."""
        deprecated_alias("anarchon_celery.Settings", "republish")
        return self.resend

    def build_backend(self) -> Backend:
        """The backend (no I/O: backends connect on ``open()``)."""
        if isinstance(self.backend, Backend):
            if self.backend_options:
                raise ConfigurationError(
                    "anarchon_options only applies when anarchon_backend is a URL; "
                    "configure the backend object directly")
            return self.backend
        if self.source == DJANGO_SOURCE and "://" not in self.backend:
            return _django_backend(self.backend, self.backend_options)
        return from_url(self.backend, **dict(self.backend_options))

    def describe(self) -> str:
        """One line for the beat banner, without passwords."""
        backend = self.backend
        text = repr(backend) if isinstance(backend, Backend) else _sanitize(backend)
        extra = ", ".join(f"{k}={v!r}" for k, v in self.backend_options.items())
        return f"{text}{' (' + extra + ')' if extra else ''} [{self.source}]"


def _get(conf: Any, key: str) -> Any:
    for candidate in (key, key.upper(), "CELERY_" + key.upper()):
        try:
            value = conf.get(candidate)
        except Exception:  # a lazy settings object that cannot load
            value = None
        if value is not None:
            return value
    return None


def _django_settings() -> Mapping[str, Any] | None:
    """``settings.ANARCHON`` when Django is installed and configured, else ``None``."""
    try:
        from django.conf import settings  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        if not settings.configured:
            return None
        value = getattr(settings, "ANARCHON", None)
    except Exception:
        return None
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"settings.ANARCHON must be a dict, got {type(value).__name__}")
    return {str(k).lower(): v for k, v in value.items()}


def _django_backend(name: str, options: Mapping[str, Any]) -> Backend:
    """``ANARCHON["BACKEND"]`` given by name (``"django"``, the ORM store, or a dotted
    path), built by anarchon_django exactly as ``manage.py anarchon run`` builds it."""
    from dataclasses import replace

    from anarchon_django.settings.backend import build_backend
    from anarchon_django.settings.conf import get_settings

    return build_backend(replace(get_settings(), backend=name, options=dict(options)))


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{key} must be a dict, got {type(value).__name__}: {value!r}")
    return dict(value)


def resolve(app: Any) -> Settings:
    """Read the settings of ``app`` (no I/O). Raises
    [`ConfigurationError`][anarchon_celery.beat.config.ConfigurationError]."""
    conf = app.conf
    backend = _get(conf, "anarchon_backend")
    options = _mapping(_get(conf, "anarchon_options"), "anarchon_options")
    scheduler = _mapping(_get(conf, "anarchon_scheduler"), "anarchon_scheduler")
    source = "anarchon_backend"
    if backend is None:
        django = _django_settings()
        if django is not None and django.get("backend") is not None:
            backend = django["backend"]
            options = {**_mapping(django.get("options"), "ANARCHON['OPTIONS']"), **options}
            scheduler = {**_mapping(django.get("scheduler"), "ANARCHON['SCHEDULER']"),
                         **scheduler}
            source = DJANGO_SOURCE
    if backend is None:
        try:
            default = broker_store_url(_get(conf, "broker_url"), _get(conf, "broker_use_ssl"),
                                       _get(conf, "broker_transport_options"))
        except BrokerStoreError as exc:
            raise ConfigurationError(f"anarchon_celery: {exc}") from None
        if default is None:
            raise ConfigurationError(
                "anarchon_celery needs a store: set anarchon_backend in the Celery config "
                "(e.g. app.conf.anarchon_backend = 'redis://localhost:6379/0' or "
                "'postgresql://…' or 'sqlite:///beat.db'); the broker is not Redis, so "
                "there is no default")
        backend = default
        options = {"prefix": DEFAULT_PREFIX, **options}
        source = "default: the broker's Redis"
    if not isinstance(backend, (str, Backend)):
        raise ConfigurationError("anarchon_backend must be a URL or an anarchon backend, got "
                                 f"{type(backend).__name__}: {backend!r}")
    track, resend = (_get_renamed(conf, name) for name in ("track", "resend"))
    queue_lease = _get(conf, "anarchon_queue_lease")
    stop_timeout = _get(conf, "anarchon_stop_timeout")
    metrics = _get(conf, "anarchon_metrics")
    if metrics is not None and not isinstance(metrics, bool):
        raise ConfigurationError(f"anarchon_metrics must be True or False, got {metrics!r}")
    port = _get(conf, "anarchon_metrics_port")
    try:
        metrics_port = port_from(port, "anarchon_metrics_port") if port is not None else None
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    return Settings(
        backend=backend,
        backend_options=options,
        scheduler_options=scheduler,
        track=bool(track),
        resend=bool(resend),
        queue_lease=parse_duration(queue_lease if queue_lease is not None else 600,
                                   option="anarchon_queue_lease"),
        stop_timeout=parse_duration(stop_timeout if stop_timeout is not None else 30,
                                    option="anarchon_stop_timeout"),
        source=source,
        metrics=bool(metrics),
        metrics_port=metrics_port,
    )


def _get_renamed(conf: Any, name: str) -> Any:
    """``anarchon_<name>``, or its deprecated key (with a ``DeprecationWarning``)."""
    old = next(o for o, n in RENAMED.items() if n == name)
    value, old_value = _get(conf, f"anarchon_{name}"), _get(conf, f"anarchon_{old}")
    if old_value is None:
        return value
    if value is not None and bool(value) != bool(old_value):
        raise ConfigurationError(f"anarchon_{old} and anarchon_{name} are the same setting "
                                 f"(anarchon_{old} is its deprecated name); set only "
                                 f"anarchon_{name}")
    deprecated_alias("the Celery config", f"anarchon_{old}", f"anarchon_{name}", stacklevel=4)
    return old_value


def _sanitize(url: str) -> str:
    try:
        from kombu.utils.url import maybe_sanitize_url
    except ImportError:  # pragma: no cover - kombu comes with celery
        return url
    return str(maybe_sanitize_url(url))


__all__ = ["ConfigurationError", "DEFAULT_PREFIX", "FRAMEWORK", "Settings", "resolve"]
