"""The credit ledger (SEMANTICS 27): budgets counted exactly, with no float noise."""

from __future__ import annotations

from typing import Any

import pytest

import playline as pl
from playline._engine.ledger import Ledger
from playline.tools import ToolSpec


def _spec(registry: pl.ToolRegistry, credits: float) -> ToolSpec:
    @registry.tool("ledger.tenths", cost=pl.Cost(credits), batch=pl.Batch(max_size=10))
    def tenths(inputs: list[Any]) -> list[Any]:
        return inputs

    spec: ToolSpec = tenths.__playline_tool__  # type: ignore[attr-defined]
    return spec


def _paid(ledger: Ledger, spec: ToolSpec, reserved: int, charged: int) -> None:
    entries = [
        ledger.entry(spec, f"k{n}", spec.cost.credits, True, "rows", str(n)) for n in range(charged)
    ]
    ledger.settle(spec, reserved, entries)


def test_reservations_given_back_leave_nothing_in_flight(registry: pl.ToolRegistry) -> None:
    """0.3 and 0.7 reserved, then given back: in floats, -1.11022e-16 was left in flight."""
    spec = _spec(registry, 0.1)
    ledger = Ledger("run", pl.ManualClock(), max_credits=1)
    assert ledger.reserve(spec, 3) == 3 and ledger.reserve(spec, 7) == 7
    assert ledger.reserve(spec, 1) == 0  # a budget of 1 holds ten calls of 0.1, no more
    ledger.release(spec, 3)
    _paid(ledger, spec, 7, 7)
    assert ledger.reserved == 0 and ledger.spent == 0.7
    message = str(ledger.exceeded(spec, 4))
    assert "Budget of 1 credits would be exceeded: 0.7 spent, 0 in flight, and 4 more call(s)" in (
        message
    )
    assert "may cost 0.4." in message and "e-" not in message


@pytest.mark.parametrize("credits", [0.1, 0.01, 0.07, 1 / 3])
def test_a_budget_holds_exactly_the_calls_that_fit(
    registry: pl.ToolRegistry, credits: float
) -> None:
    spec = _spec(registry, credits)
    ledger = Ledger("run", pl.ManualClock(), max_credits=30 * credits)
    for _ in range(30):  # one at a time, each settled: thirty fit, the thirty-first does not
        assert ledger.reserve(spec, 1) == 1
        _paid(ledger, spec, 1, 1)
    assert ledger.reserve(spec, 1) == 0
    assert ledger.reserved == 0 and ledger.in_doubt == 0


def test_calls_in_doubt_resolved_leave_nothing_in_doubt(registry: pl.ToolRegistry) -> None:
    spec = _spec(registry, 0.1)
    ledger = Ledger("run", pl.ManualClock(), max_credits=1)
    ledger.doubt({"a": 0.1, "b": 0.2, "c": 0.3})
    assert ledger.reserve(spec, 10) == 4
    for key in ("a", "b", "c"):
        ledger.resolve(key)
    assert ledger.in_doubt == 0
    assert "in doubt" not in str(ledger.exceeded(spec, 1))


def test_a_call_in_doubt_is_counted_once_however_often_it_is_found(
    registry: pl.ToolRegistry,
) -> None:
    """Found in doubt by a child play and by its parent (which looks at its children's
    receipts too), or failed in doubt again: its worst case counts once in each budget."""
    spec = _spec(registry, 1)
    parent = Ledger("run", pl.ManualClock(), max_credits=3)
    child = Ledger("run/child", pl.ManualClock(), parent=parent)
    parent.doubt({"a": 1})
    child.doubt({"a": 1})
    child.doubt({"a": 1, "b": 1})
    assert (parent.in_doubt, child.in_doubt) == (2, 2)
    assert child.reserve(spec, 5) == 1


def test_what_earlier_attempts_spent_is_counted_without_the_noise_of_its_sum(
    registry: pl.ToolRegistry,
) -> None:
    """A resume starts from the store's sum of the run's charges, a float sum: 0.1 + 0.2 +
    0.3 is 0.6000000000000001 there, which must not refuse a call of 0.1 in a budget of 0.7."""
    spec = _spec(registry, 0.1)
    ledger = Ledger("run", pl.ManualClock(), max_credits=0.7, spent=0.1 + 0.2 + 0.3)
    assert ledger.spent == 0.6
    assert ledger.reserve(spec, 5) == 1
