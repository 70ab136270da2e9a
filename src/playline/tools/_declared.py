"""What a tool declares, as its gate reads it: whose budget its calls spend, the share of its
declared rate that is used, its concurrency cap when it declares none, and whether processes
on one store share its gate."""

from __future__ import annotations

from ._spec import ToolSpec

__all__ = ["DEFAULT_CONCURRENCY", "PACE", "gate_key", "shares_gate"]

DEFAULT_CONCURRENCY = 8
PACE = 0.95  # share of a declared rate used: network jitter must not push requests over it


def gate_key(spec: ToolSpec) -> str:
    """Whose budget a call spends: the tool's, per provider account (two accounts of one
    provider have a limit each; the account is the tool's ``auth_scope``, never a secret)."""
    return f"{spec.id}@{spec.auth_scope}"


def shares_gate(spec: ToolSpec) -> bool:
    """Whether processes on one shared store share this tool's gate: a tool called at a
    provider (its rate is the provider's, declared or learned), or one that declares a rate.
    A local function with no declared rate is limited by nothing but this process."""
    return spec.auth_scope != "local" or spec.rate.per_second is not None
