"""Owners, records and calls the store conformance tests share."""

from __future__ import annotations

import socket
import subprocess
import sys
from typing import Any

from playline.store import (
    Claim,
    ClaimResult,
    Completion,
    Failure,
    LedgerEntry,
    RunRecord,
    RunStatus,
    Store,
    owner_id,
)

NOW = 1_000.0
LEASE = NOW + 60
# Attempts of this process that are not running (``owner_alive`` is False for them at once).
ME = owner_id("me")
OTHER = owner_id("other")
# Holders on another host: only their leases say whether they live.
FAR = "far-host.invalid/4242/a"
FAR2 = "far-host.invalid/4242/b"


def dead_owner() -> str:
    """A holder on this host whose process has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{socket.gethostname()}/{proc.pid}/token"


def claim(
    store: Store,
    *keys: str,
    owner: str = ME,
    now: float = NOW,
    tool: str = "email",
    run_id: str = "r1",
    **options: Any,
) -> list[ClaimResult]:
    """Claim ``keys`` under a lease of 60 s; ``options`` are Claim's (force, resend, ...)."""
    return store.claim_receipts(
        [Claim(key=k, tool=tool, run_id=run_id, **options) for k in keys],
        owner=owner,
        lease_until=now + 60,
        now=now,
    )


def complete(
    store: Store, *results: tuple[str, bytes], owner: str = ME, now: float = NOW
) -> dict[str, bytes]:
    return store.complete_receipts(
        [Completion(key=k, result=r) for k, r in results], owner=owner, now=now
    )


def fail(store: Store, *errors: tuple[str, str], owner: str = ME, now: float = NOW) -> None:
    store.fail_receipts([Failure(key=k, error=e) for k, e in errors], owner=owner, now=now)


def charge(key: str, credits: float = 1.0, *, run_id: str = "r1", generation: int = 1) -> Any:
    return LedgerEntry(
        run_id=run_id,
        tool="email",
        receipt_key=key,
        credits=credits,
        found=True,
        at=NOW,
        generation=generation,
    )


def run(run_id: str, status: RunStatus = RunStatus.SUSPENDED, **fields: Any) -> RunRecord:
    """A run record; ``created_at``/``updated_at`` default to NOW."""
    fields.setdefault("created_at", NOW)
    fields.setdefault("updated_at", NOW)
    return RunRecord(run_id=run_id, play=fields.pop("play", "find_emails"), status=status, **fields)
