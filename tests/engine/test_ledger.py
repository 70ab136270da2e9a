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


def _worst(spec: ToolSpec, calls: int) -> list[int]:
    return Ledger.worst(spec, [{}] * calls)


def _reserve(ledger: Ledger, spec: ToolSpec, calls: int) -> int:
    return ledger.reserve(spec, _worst(spec, calls))


def _paid(ledger: Ledger, spec: ToolSpec, reserved: int, charged: int) -> None:
    entries = [
        ledger.entry(spec, f"k{n}", spec.cost.credits, True, "rows", str(n)) for n in range(charged)
    ]
    ledger.settle(spec, sum(_worst(spec, reserved)), entries)


def test_reservations_given_back_leave_nothing_in_flight(registry: pl.ToolRegistry) -> None:
    """0.3 and 0.7 reserved, then given back: in floats, -1.11022e-16 was left in flight."""
    spec = _spec(registry, 0.1)
    ledger = Ledger("run", pl.ManualClock(), max_credits=1)
    assert _reserve(ledger, spec, 3) == 3 and _reserve(ledger, spec, 7) == 7
    assert _reserve(ledger, spec, 1) == 0  # a budget of 1 holds ten calls of 0.1, no more
    ledger.release(spec, sum(_worst(spec, 3)))
    _paid(ledger, spec, 7, 7)
    assert ledger.reserved == 0 and ledger.spent == 0.7
    message = str(ledger.exceeded(spec, _worst(spec, 4)))
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
        assert _reserve(ledger, spec, 1) == 1
        _paid(ledger, spec, 1, 1)
    assert _reserve(ledger, spec, 1) == 0
    assert ledger.reserved == 0 and ledger.in_doubt == 0


def test_calls_in_doubt_resolved_leave_nothing_in_doubt(registry: pl.ToolRegistry) -> None:
    spec = _spec(registry, 0.1)
    ledger = Ledger("run", pl.ManualClock(), max_credits=1)
    ledger.doubt({"a": 0.1, "b": 0.2, "c": 0.3})
    assert _reserve(ledger, spec, 10) == 4
    for key in ("a", "b", "c"):
        ledger.resolve(key)
    assert ledger.in_doubt == 0
    assert "in doubt" not in str(ledger.exceeded(spec, _worst(spec, 1)))


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
    assert _reserve(child, spec, 5) == 1


def test_what_earlier_attempts_spent_is_counted_without_the_noise_of_its_sum(
    registry: pl.ToolRegistry,
) -> None:
    """A resume starts from the store's sum of the run's charges, a float sum: 0.1 + 0.2 +
    0.3 is 0.6000000000000001 there, which must not refuse a call of 0.1 in a budget of 0.7."""
    spec = _spec(registry, 0.1)
    ledger = Ledger("run", pl.ManualClock(), max_credits=0.7, spent=0.1 + 0.2 + 0.3)
    assert ledger.spent == 0.6
    assert _reserve(ledger, spec, 5) == 1


def _priced(registry: pl.ToolRegistry, unit: str = "usd") -> ToolSpec:
    """A tool whose calls cost at most what their input says (an LLM call's worst case)."""

    @registry.tool(
        f"ledger.{unit}",
        cost=pl.Cost(0, unit=unit, worst=lambda input: input["worst"]),  # type: ignore[arg-type]
        batch=pl.Batch(max_size=10),
    )
    def priced(inputs: list[Any]) -> list[Any]:
        return inputs

    spec: ToolSpec = priced.__playline_tool__  # type: ignore[attr-defined]
    return spec


def test_each_call_reserves_its_own_worst_case(registry: pl.ToolRegistry) -> None:
    """Calls of one tool that may cost different amounts: as many of the first ones as fit."""
    spec = _priced(registry)
    ledger = Ledger("run", pl.ManualClock(), max_usd=1)
    worst = Ledger.worst(spec, [{"worst": w} for w in (0.25, 0.5, 0.3, 0.01)])
    assert ledger.reserve(spec, worst) == 2  # 0.75 held; 0.3 more would pass 1
    assert ledger.in_flight(spec)
    assert ledger.reserve(spec, worst[3:]) == 1  # a smaller one still fits
    ledger.settle(
        spec, sum(worst[:2]) + worst[3], [ledger.entry(spec, "a", 0.02, True, None, None)]
    )
    assert ledger.spent_usd == 0.02 and not ledger.in_flight(spec)
    message = str(ledger.exceeded(spec, Ledger.worst(spec, [{"worst": 2}])))
    assert "Budget of $1.00 would be exceeded: $0.02 spent, $0 in flight" in message
    assert "may cost $2.00" in message and "raise max_usd" in message


def test_dollars_and_credits_are_budgets_of_their_own(registry: pl.ToolRegistry) -> None:
    """A budget in dollars never refuses a call paid in credits, nor the other way round."""
    usd, credits = _priced(registry), _spec(registry, 1)
    ledger = Ledger("run", pl.ManualClock(), max_credits=2, max_usd=0.5)
    assert ledger.reserve(usd, Ledger.worst(usd, [{"worst": 0.5}] * 3)) == 1
    assert _reserve(ledger, credits, 5) == 2  # dollars held in flight take no credits
    ledger.settle(usd, Ledger.worst(usd, [{"worst": 0.5}])[0], [])
    assert ledger.reserved == 2 and ledger.spent_usd == 0 and ledger.spent == 0
    entry = ledger.entry(usd, "k", 0.1, True, None, None)
    assert entry.unit == "usd" and ledger.entry(credits, "k", 1, True, None, None).unit == "credits"


def test_a_call_in_doubt_holds_its_worst_case_in_its_own_unit(registry: pl.ToolRegistry) -> None:
    spec = _priced(registry)
    ledger = Ledger("run", pl.ManualClock(), max_usd=1)
    ledger.doubt_calls(spec, {"a": {"worst": 0.75}})
    assert ledger.in_doubt_usd == 0.75 and ledger.in_doubt == 0
    assert ledger.reserve(spec, Ledger.worst(spec, [{"worst": 0.5}])) == 0
    ledger.resolve("a")
    assert ledger.reserve(spec, Ledger.worst(spec, [{"worst": 0.5}])) == 1
