"""URL helpers shared by every backend's ``from_url``: our own query options apart from
the driver's, redacted passwords."""

from __future__ import annotations

from collections.abc import Callable, Collection
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def split_options(url: str, names: Collection[str], *, keep_blank: bool = False,
                  keep_fragment: bool = False,
                  check: Callable[[str], None] | None = None) -> tuple[str, dict[str, str]]:
    """Split ``url``'s query into anarchon's options (``names``) and the rest.

    Returns the URL with only the other query parameters left (for the driver) and a
    dict of ours, as strings. ``check(key)`` is called for every other parameter (it
    raises for one the driver does not know); ``keep_blank`` keeps ``key=`` parameters,
    ``keep_fragment`` the ``#fragment``.
    """
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    rest = []
    for key, value in parse_qsl(parts.query, keep_blank_values=keep_blank):
        if key in names:
            ours[key] = value
        else:
            if check is not None:
                check(key)
            rest.append((key, value))
    fragment = parts.fragment if keep_fragment else ""
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest),
                       fragment)), ours


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def url_flag(name: str, value: str) -> bool:
    """A yes/no URL option (``1``/``0``, ``true``/``false``, ``yes``/``no``, ``on``/``off``)."""
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ValueError(f"{name} must be 1 or 0 (true/false, yes/no, on/off), got {value!r} "
                     "in the backend URL")


def redact(url: str | None) -> str:
    """``url`` with its password replaced by ``***``, for messages and reprs."""
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
