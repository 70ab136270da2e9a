"""What a tool declares, as its gate reads it: whose budget its calls spend, the share of its
declared rate and burst that is used, its concurrency cap when it declares none, and whether
processes on one store share its gate."""

from __future__ import annotations

import math

from ._spec import ToolSpec

__all__ = [
    "DEFAULT_CONCURRENCY",
    "JITTER",
    "PACE",
    "WINDOW_MARGIN",
    "account_of",
    "gate_burst",
    "gate_key",
    "gate_units",
    "gate_windows",
    "shares_gate",
]

DEFAULT_CONCURRENCY = 8
PACE = 0.95  # share of a declared rate used: network jitter must not push requests over it
JITTER = 0.1  # seconds by which requests may arrive closer together than their tokens left
WINDOW_MARGIN = 1.0  # seconds a window (500 a minute) is kept longer than declared


def gate_burst(spec: ToolSpec, ceiling: float) -> int:
    """The most requests a gate lets out at once (at a rate of ``ceiling``): the provider's
    burst less ``JITTER`` seconds of tokens, at least 1.

    Past a burst, the provider's bucket and the gate's are both empty, and a request that
    arrives sooner after the one before than its token came (a process descheduled between
    its lease and its send, another process's request on a faster path) is answered 429.
    The tokens the gate keeps back stay in the provider's bucket for those. Measured with
    four processes on one PostgreSQL store at 5-50 requests/s (``python -m bench
    contention``): with the full burst, up to three 429s a run; with 0.25 s kept back, none,
    but the four took 1.32x one process's wall (bursts after a lull are slower); with 0.1 s,
    none in two runs, at 1.15x. A provider whose burst is smaller than that (5 a second, a
    burst of 1) leaves nothing to keep back: the pace (``PACE``) is all the room there is,
    and a 429 is retried (``_learning.py``)."""
    burst = spec.rate.burst or max(1, int(ceiling))
    return max(1, burst - math.ceil(ceiling * JITTER))


def account_of(spec: ToolSpec) -> str:
    """Whose quota and blocks a call meets: its provider account (every tool declared for
    it); a local tool's are its own."""
    return spec.id if spec.auth_scope == "local" else spec.auth_scope


def gate_windows(spec: ToolSpec) -> tuple[tuple[float, int], ...]:
    """The tool's windows as its gate keeps them: each held ``WINDOW_MARGIN`` longer than
    declared. A gate counts a request when it lets it out, and the provider when it arrives,
    a claim's commit later: a slot freed on the dot could be spent before the provider's
    window has let the old request go."""
    return tuple((seconds + WINDOW_MARGIN, limit) for seconds, limit in spec.rate.windows)


def gate_units(spec: ToolSpec) -> int:
    """How many of a gate's units a call slot is: 1, or, when the provider counts every
    record of a bulk request (``Rate(per_record=True)``), the bulk size, so that the declared
    ``concurrency`` (in requests) still lets full requests through."""
    rate = spec.rate
    return spec.batch.max_size if rate.per_record and spec.batch else 1


def gate_key(spec: ToolSpec) -> str:
    """Whose budget a call spends: the tool's, per provider account (two accounts of one
    provider have a limit each; the account is the tool's ``auth_scope``, never a secret)."""
    return f"{spec.id}@{spec.auth_scope}"


def shares_gate(spec: ToolSpec) -> bool:
    """Whether processes on one shared store share this tool's gate: a tool called at a
    provider (its rate is the provider's, declared or learned), or one that declares a rate
    or a window. A local function with neither is limited by nothing but this process."""
    rate = spec.rate
    return spec.auth_scope != "local" or rate.per_second is not None or bool(rate.windows)
