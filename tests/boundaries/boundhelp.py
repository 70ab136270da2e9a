"""What the boundary tests share (a helper module: test folders' conftests share one name)."""

from __future__ import annotations

import itertools

_names = itertools.count()

DAY = 86_400.0


def unique(name: str) -> str:
    """A play name no other test registers."""
    return f"{name}-{next(_names)}"
