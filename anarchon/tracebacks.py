"""How a failed attempt's exception is kept in history: its full traceback, bounded.

History stores the text ``describe()`` makes: the exception's whole traceback (the
chained ones included) as Python prints it, at most ``MAX_ERROR`` characters. A
longer one keeps its *end* — the frames nearest the failure and the exception's own line
— behind a marker line. The last line is always the one-line summary
(``KeyError: 'missing-key'``), which ``summary()`` returns for tables.
"""

from __future__ import annotations

import traceback

#: the most characters of traceback text one history record keeps (16 KiB)
MAX_ERROR = 16 * 1024


def describe(error: BaseException | None) -> str | None:
    """The bounded traceback text of ``error`` (``None`` for no error)."""
    if error is None:
        return None
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    text = text.strip() or type(error).__name__
    if len(text) <= MAX_ERROR:
        return text
    marker = f"[… the first {len(text) - MAX_ERROR} characters of the traceback were cut]\n"
    return marker + text[len(text) - MAX_ERROR + len(marker):]


def summary(error: str | None) -> str:
    """The one-line summary of a stored error text: its last non-empty line."""
    lines = [line for line in (error or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
