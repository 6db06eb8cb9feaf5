"""A dynamic job's ``params`` as the arguments of the actor's message.

One rule, applied when the slot winner sends the message (the store keeps ``params`` as
JSON, so they are checked where the actor is known):

* no params (``None``): the actor is sent without arguments;
* a list: positional arguments (``[1, "a"]`` → ``actor.send(1, "a")``);
* an object with ``"args"`` and/or ``"kwargs"`` and no other key: ``args`` (a list) as
  positional, ``kwargs`` (an object) as keyword arguments;
* any other object: keyword arguments (``{"tenant": 7}`` → ``actor.send(tenant=7)``).
  An actor whose keyword argument is itself named ``args`` or ``kwargs`` takes the
  explicit form: ``{"kwargs": {"args": …}}``.

Anything else (a number, a string, ``true``; ``args`` that is not a list, ``kwargs``
that is not an object, an object mixing ``args``/``kwargs`` with other keys) is refused
with a [`ParamsError`][anarchon_dramatiq.params.ParamsError]: the run fails with its
message, logged at ERROR, and no message is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the keys of the explicit form ``{"args": [...], "kwargs": {...}}``
EXPLICIT_KEYS = frozenset({"args", "kwargs"})


class ParamsError(ValueError):
    """A dynamic job's ``params`` that cannot be a message's arguments."""


def message_arguments(params: Any, job: str, actor: str) -> tuple[tuple[Any, ...],
                                                                  dict[str, Any]]:
    """``(args, kwargs)`` for job ``job``'s message to ``actor``, by the module's rule."""
    where = f"dynamic job {job!r} (handler 'dramatiq:{actor}')"
    if params is None:
        return (), {}
    if isinstance(params, list):
        return tuple(params), {}
    if not isinstance(params, Mapping):
        raise ParamsError(
            f"{where}: params must be a list (args), an object (kwargs) or "
            f'{{"args": [...], "kwargs": {{...}}}}, got {type(params).__name__} '
            f"{params!r}; no message is sent")
    keys = set(params)
    if not keys & EXPLICIT_KEYS:
        return (), _kwargs(dict(params), where)
    extra = sorted(str(k) for k in keys - EXPLICIT_KEYS)
    if extra:
        raise ParamsError(
            f"{where}: params mixes 'args'/'kwargs' with other keys {extra}; give either "
            f'{{"args": [...], "kwargs": {{...}}}} alone, or an object of keyword '
            f'arguments only (a keyword argument named args/kwargs goes in '
            f'{{"kwargs": {{...}}}}); no message is sent')
    args = params.get("args", [])
    if not isinstance(args, list):
        raise ParamsError(f"{where}: params 'args' must be a list, got "
                          f"{type(args).__name__} {args!r}; no message is sent")
    kwargs = params.get("kwargs", {})
    if not isinstance(kwargs, Mapping):
        raise ParamsError(f"{where}: params 'kwargs' must be an object, got "
                          f"{type(kwargs).__name__} {kwargs!r}; no message is sent")
    return tuple(args), _kwargs(dict(kwargs), where)


def _kwargs(kwargs: dict[Any, Any], where: str) -> dict[str, Any]:
    bad = sorted(repr(k) for k in kwargs if not isinstance(k, str) or not k.isidentifier())
    if bad:
        raise ParamsError(f"{where}: keyword argument names must be identifiers, got "
                          f"{', '.join(bad)}; no message is sent")
    return kwargs
