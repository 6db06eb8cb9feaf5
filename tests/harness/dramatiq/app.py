"""The Dramatiq app the broker tests run, configured by environment variables.

``ADT_BROKER`` (``redis``/``rabbitmq``), ``ADT_NAMESPACE`` (Redis namespace and queue
name), ``ADT_STORE`` (anarchon store URL), ``ADT_LOG`` (JSONL log), ``ADT_ROLE``
(``scheduler``/``worker``), ``ADT_SCENARIO`` (which actor is declared), ``ADT_AT``
(epoch seconds for ``at`` scenarios), ``ADT_LEASE``/``ADT_HEARTBEAT``, ``ADT_MIDDLEWARE``
(``0``: the broker gets no ``AnarchonMiddleware``, the configuration slip of tracking
without it).

Scheduler processes log every message they enqueue (``sent``, with its actor and
arguments); workers log each execution (``begin``/``end``; ``echo`` with the arguments).
The ``control`` scenario declares ``tick`` and ``clock`` (every 1 s, untracked) and the
unmarked ``echo``, a handler for dynamic jobs (``dramatiq:echo``). In the ``hang``
scenario a scheduler blocks before publishing attempt 1, so a test can kill it between
winning the slot and sending. In the ``pause`` scenario (the same ``once`` job) each
scheduler's first send waits, before its lease check, until the file ``ADT_LOG + ".gate"``
exists (logging ``gate``), so a test can SIGSTOP the winner there. The ``manual``
scenario declares ``report`` (every hour, tracked), for Run now.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import dramatiq
from dramatiq import Broker, Middleware
from dramatiq.message import Message
from dramatiq.middleware import CurrentMessage

import anarchon_dramatiq as ad

ENV = os.environ
ROLE = ENV.get("ADT_ROLE", "worker")
NAMESPACE = ENV["ADT_NAMESPACE"]
SCENARIO = ENV["ADT_SCENARIO"]
LEASE = float(ENV.get("ADT_LEASE", "2"))
HEARTBEAT = float(ENV.get("ADT_HEARTBEAT", "0.3"))
_lock = threading.Lock()


def log(**fields: Any) -> None:
    fields.update(t=time.time(), role=ROLE, pid=os.getpid())
    with _lock, open(ENV["ADT_LOG"], "a") as handle:
        handle.write(json.dumps(fields) + "\n")


def make_broker() -> Broker:
    if ENV["ADT_BROKER"] == "redis":
        from dramatiq.brokers.redis import RedisBroker

        url = ENV["ANARCHON_REDIS_URL"]
        return RedisBroker(url=url, namespace=NAMESPACE)  # type: ignore[no-untyped-call]
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    url = ENV["ANARCHON_RABBITMQ_URL"]
    return RabbitmqBroker(url=url, confirm_delivery=True)


class Recorder(Middleware):
    """Logs what schedulers enqueue; in the ``hang`` scenario blocks attempt 1's send."""

    def before_enqueue(self, broker: Broker, message: Message[Any], delay: int) -> None:
        attempt = message.options.get("anarchon_attempt")
        if ROLE == "scheduler" and SCENARIO == "hang" and attempt == 1:
            log(kind="hang", slot=message.options["anarchon_slot"], attempt=attempt)
            time.sleep(3600)  # killed here by the test

    def after_enqueue(self, broker: Broker, message: Message[Any], delay: int) -> None:
        if ROLE == "scheduler" and "anarchon_slot" in message.options:
            log(kind="sent", job=message.options["anarchon_job"],
                slot=message.options["anarchon_slot"],
                attempt=message.options["anarchon_attempt"], message_id=message.message_id,
                actor=message.actor_name, args=list(message.args), kwargs=message.kwargs)


broker = make_broker()
broker.add_middleware(CurrentMessage())
broker.add_middleware(Recorder())
if ENV.get("ADT_MIDDLEWARE", "1") == "1":
    ad.install_middleware(broker, ENV["ADT_STORE"], lease=LEASE, heartbeat=HEARTBEAT)
dramatiq.set_broker(broker)


def _current() -> dict[str, Any]:
    message = CurrentMessage.get_current_message()
    assert message is not None
    return dict(message.options)


def _begin() -> dict[str, Any]:
    options = _current()
    log(kind="begin", job=options.get("anarchon_job"), slot=options.get("anarchon_slot"),
        attempt=options.get("anarchon_attempt"), retries=options.get("retries", 0))
    return options


if SCENARIO == "count":
    @ad.every("1s", track=True)
    @dramatiq.actor(queue_name=NAMESPACE)
    def tick() -> None:
        options = _begin()
        log(kind="end", slot=options["anarchon_slot"], attempt=options["anarchon_attempt"])

elif SCENARIO == "fail":
    @ad.at(float(ENV["ADT_AT"]), track=True)
    @dramatiq.actor(queue_name=NAMESPACE, max_retries=2, min_backoff=1500, max_backoff=2000)
    def failing() -> None:
        options = _begin()
        log(kind="raise", slot=options["anarchon_slot"], retries=options.get("retries", 0))
        raise RuntimeError("always fails")

elif SCENARIO in ("hang", "pause"):
    @ad.at(float(ENV["ADT_AT"]))
    @dramatiq.actor(queue_name=NAMESPACE)
    def once() -> None:
        options = _begin()
        log(kind="end", slot=options["anarchon_slot"], attempt=options["anarchon_attempt"])

elif SCENARIO == "crash":
    @ad.at(float(ENV["ADT_AT"]), track=True, resend=True)
    @dramatiq.actor(queue_name=NAMESPACE, max_retries=0)
    def slow() -> None:
        options = _begin()
        if options["anarchon_attempt"] == 1:
            time.sleep(3600)  # the worker is killed meanwhile
        log(kind="end", slot=options["anarchon_slot"], attempt=options["anarchon_attempt"])

elif SCENARIO == "manual":
    @ad.every("1h", track=True)
    @dramatiq.actor(queue_name=NAMESPACE)
    def report(*args: Any, **kwargs: Any) -> None:
        options = _begin()
        log(kind="end", job=options.get("anarchon_job"), slot=options["anarchon_slot"],
            attempt=options["anarchon_attempt"], args=list(args), kwargs=kwargs)

elif SCENARIO == "control":
    @ad.every("1s")
    @dramatiq.actor(queue_name=NAMESPACE)
    def tick() -> None:
        _begin()

    @ad.every("1s")
    @dramatiq.actor(queue_name=NAMESPACE)
    def clock() -> None:
        _begin()

    @dramatiq.actor(queue_name=NAMESPACE)
    def echo(*args: Any, **kwargs: Any) -> None:
        options = _begin()
        log(kind="echo", job=options.get("anarchon_job"), slot=options.get("anarchon_slot"),
            args=list(args), kwargs=kwargs)


if ROLE == "scheduler" and SCENARIO == "pause":
    from anarchon_dramatiq import outbox as _outbox

    _send = _outbox.send
    _gated: list[bool] = []

    def _gated_send(fn: Any) -> Any:
        if not _gated:  # the first send of this process: wait for the test's gate
            _gated.append(True)
            log(kind="gate")
            while not os.path.exists(ENV["ADT_LOG"] + ".gate"):
                time.sleep(0.02)
        return _send(fn)

    _outbox.send = _gated_send
