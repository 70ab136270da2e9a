"""Money as people read it: every display and message that shows dollars uses this."""

from __future__ import annotations

import math

__all__ = ["dollars_text"]


def dollars_text(usd: float) -> str:
    """Dollars for people to read: cents from a dollar up (``$1,234.50``), three significant
    digits below one (``$0.0123``, ``$0.0000447``: an LLM call costs fractions of a cent,
    which ``$0.0000`` hid, and ``$4.47e-05`` garbled). Machine output (``--json``) keeps the
    exact value."""
    if usd == 0:
        return "$0"
    if abs(usd) >= 1:
        return f"${usd:,.2f}"
    places = 2 - math.floor(math.log10(abs(usd)))
    return f"${usd:.{places}f}".rstrip("0").rstrip(".")
