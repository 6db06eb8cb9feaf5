"""The claim-only comparison strategies of Redis/Valkey (``stream-id``, ``script``,
``idmp``): lab code, in the ``anarchon-lab`` distribution (``anarchon_lab.redis_strategies``).

The core keeps only the way in: ``from_url`` builds one only with the explicit opt-in
``lab=1`` and only when the lab is installed (``anarchon.backends.lab``).
"""

from __future__ import annotations

from typing import Any

from ..base import ClaimBackend
from ..lab import lab_part
from .connection import Kind

#: the comparison strategies the lab provides
COMPARISONS: tuple[str, ...] = ("stream-id", "script", "idmp")


def check_strategy(strategy: str, kind: Kind) -> None:
    """``ValueError`` naming the valid strategies for an unknown one."""
    if strategy not in COMPARISONS:
        raise ValueError(f"unknown {kind} strategy {strategy!r}; use one of: lease, "
                         + ", ".join(COMPARISONS))


def check_lab_opt_in(strategy: str, kind: Kind, lab: object) -> None:
    """``from_url`` builds a comparison strategy only with the explicit opt-in ``lab=1``:
    an unknown strategy raises ``ValueError`` naming the valid ones, a known one without
    the opt-in ``ValueError`` naming the option."""
    check_strategy(strategy, kind)
    if lab is not True and lab != 1:
        raise ValueError(
            f"{kind} strategy {strategy!r} is lab code (a claim-only comparison: one winner "
            f"per slot, no lease, no takeover) and from_url builds it only when asked "
            f"explicitly: add lab=1 to the URL ('{kind}://…?strategy={strategy}&lab=1') or "
            f"build it with anarchon.backends.redis.comparison_backend({strategy!r}, url, "
            f"kind={kind!r}); the store for real jobs is strategy=lease (the default)")


def comparison_backend(strategy: str, client: object = "redis://localhost:6379", *,
                       kind: Kind = "redis", **options: Any) -> ClaimBackend:
    """Build the claim-only comparison backend for ``strategy`` (``"stream-id"``,
    ``"script"`` or ``"idmp"``) on ``client`` (a URL, connection kwargs or your client);
    ``kind="valkey"`` for Valkey. Options: ``prefix``, ``cluster``, ``window``
    (``script``), ``duration`` and ``max_size`` (``idmp``); unknown ones raise
    ``TypeError``, an unknown strategy ``ValueError``; without the lab installed,
    ``ImportError`` saying how to install it."""
    check_strategy(strategy, kind)
    build = lab_part("redis-comparison", f"{kind} strategy {strategy!r}")
    backend: ClaimBackend = build(strategy, client, kind=kind, **options)
    return backend


def strategy_class(name: str) -> Any:
    """The lab's class ``name`` (``StreamIdBackend``, ``ScriptBackend``, ``IdmpBackend``,
    ``RedisClaimBackend``), for the former import path ``anarchon.backends.redis``."""
    classes = lab_part("redis-strategies", f"anarchon.backends.redis.{name}")
    for cls in classes.values():
        for klass in cls.__mro__:
            if klass.__name__ == name:
                return klass
    raise AttributeError(f"module 'anarchon.backends.redis' has no attribute {name!r}")


__all__ = ["COMPARISONS", "check_lab_opt_in", "check_strategy", "comparison_backend",
           "strategy_class"]
