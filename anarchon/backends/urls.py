"""URL helpers shared by the broker backends: our own query options, redacted passwords."""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def split_options(url: str, names: Collection[str]) -> tuple[str, dict[str, str]]:
    """Split ``url``'s query into anarchon's options (``names``) and the rest.

    Returns the URL with only the other query parameters left (for the driver) and a
    dict of ours, as strings.
    """
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    rest = []
    for key, value in parse_qsl(parts.query):
        if key in names:
            ours[key] = value
        else:
            rest.append((key, value))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), "")), ours


def redact(url: str | None) -> str:
    """``url`` with its password replaced by ``***``, for messages and reprs."""
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
