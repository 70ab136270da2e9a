"""Hunter's adapter against its double (see contract.py for what every provider keeps)."""

from __future__ import annotations

from typing import Any

from contract import Case, Contract

from playline.sim._world import Person


def _found(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] in ("valid", "catch_all")
    assert 0 <= result["confidence"] <= 100


def _verified(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] in ("valid", "catch_all")


class TestFinder(Contract):
    case = Case(
        tool="hunter.email_finder",
        ask=lambda p: {"first_name": p.first_name, "last_name": p.last_name, "domain": p.domain},
        check=_found,
        used_up={"quota": 3},
        used_up_outcome="quota_exhausted",
        left=("quota", 42),
    )


class TestVerifier(Contract):
    case = Case(
        tool="hunter.email_verifier",
        ask=lambda p: {"email": p.email},
        check=_verified,
        found=lambda double, p: True,  # every address gets a verdict
        misses=False,
        used_up={"quota": 3},
        used_up_outcome="quota_exhausted",
        left=("quota", 42),
    )
