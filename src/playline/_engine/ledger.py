"""The ledger: what every live call cost, in credits or dollars, and the budgets that stop
spending."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from .._clock import Clock
from .._money import dollars_text
from ..errors import BudgetExceeded, ToolError
from ..store import LedgerEntry
from ..tools import ToolSpec
from ..tools._declared import account_of

__all__ = ["Ledger"]


class Ledger:
    """What a run spent; with ``max_credits`` or ``max_usd``, calls that could pass it are
    refused.

    Costs come in two units, each with its budget: ``credits`` (the providers' own) and
    ``usd`` (money: LLM calls are priced by their tokens). A tool's cost names its unit; a
    budget counts only its own.

    Just before a request is sent, the worst-case cost of each of its inputs is reserved (a
    request that does not fit whole is shrunk to the inputs that do); after it returns the
    reservation is replaced by what was charged. So concurrent requests can never overspend
    together, and a budget fills rows up to the cap. A call's worst case is its tool's cost,
    or what its cost's ``worst`` says of its input (an LLM call: its prompt and
    ``max_tokens`` at the model's prices).

    A call that may have been charged with no record of it (it failed in doubt, or its
    process died with the request out) keeps its worst case counted, ``in_doubt``, until a
    later send of it settles (a re-send with its idempotency key records what it cost): a slow
    provider, or a crash, never lets the budget be spent twice.

    Amounts are counted exactly, in whole billionths (``Cost(0.1)`` is 100,000,000 of them,
    not the float next to a tenth): the reservations given back leave exactly nothing in
    flight, and a budget of 1 holds ten calls of 0.1, with no epsilon; integers, so a call
    costs the hot path no more than floats did. (In floats, 0.3 and 0.7 reserved and given
    back left ``-1.11022e-16 in flight`` in the budget's message.)
    """

    def __init__(
        self,
        run_id: str,
        clock: Clock,
        *,
        max_credits: float | None = None,
        max_usd: float | None = None,
        spent: float = 0.0,
        spent_usd: float = 0.0,
        parent: Ledger | None = None,
    ) -> None:
        self._run_id = run_id
        self._clock = clock
        self.max_credits = max_credits
        self.max_usd = max_usd
        # what earlier attempts spent is the store's sum of floats, so it may carry their
        # noise (0.1 + 0.2 + 0.3 = 0.6000000000000001): rounded to the billionth
        self._purses = {"credits": _Purse(max_credits, spent), "usd": _Purse(max_usd, spent_usd)}
        # a child play's ledger: what it spends counts against its parents' budgets too
        self.parent = parent
        self._root: Ledger = self if parent is None else parent._root  # the run tree's
        self.settles = 0  # reservations settled so far: what a deferred request waits past
        self._settled: asyncio.Event | None = None  # set when a reservation is settled
        self._exhausted: dict[str, ToolError] = {}  # provider account -> what it answered
        # provider account -> [credits it has left, reserved of them]: what its provider said
        # when the run first called it (``limit_account``), spent down as the run goes
        self._accounts: dict[str, list[int] | None] = {}  # None: asked, no answer yet

    @property
    def spent(self) -> float:
        """Credits charged to the run, its earlier attempts' and its child plays' included."""
        return self._purses["credits"].spent / _UNIT

    @property
    def spent_usd(self) -> float:
        """Dollars charged to the run (LLM calls), as ``spent`` counts credits."""
        return self._purses["usd"].spent / _UNIT

    @property
    def reserved(self) -> float:
        """The worst case, in credits, of the requests sent and not yet settled."""
        return self._purses["credits"].reserved / _UNIT

    @property
    def in_doubt(self) -> float:
        """The worst case, in credits, of the calls that may have been charged with no
        record of it."""
        return self._purses["credits"].in_doubt / _UNIT

    @property
    def in_doubt_usd(self) -> float:
        return self._purses["usd"].in_doubt / _UNIT

    def _chain(self) -> list[Ledger]:
        chain: list[Ledger] = []
        ledger: Ledger | None = self
        while ledger is not None:
            chain.append(ledger)
            ledger = ledger.parent
        return chain

    @staticmethod
    def worst(spec: ToolSpec, inputs: Sequence[Mapping[str, Any]]) -> list[int]:
        """The most each call of ``spec`` with these inputs may cost, exactly."""
        cost = spec.cost
        if cost.worst is None:
            return [_exact(cost.credits)] * len(inputs)
        return [_exact(cost.most(one)) for one in inputs]

    def reserve(self, spec: ToolSpec, worst: Sequence[int]) -> int:
        """Reserve the worst case of as many calls (``worst``: each one's, from ``worst()``)
        as every budget in force allows (this run's and its parents', and what the provider
        account has left); returns how many may be sent, the first ones. When the account has
        no room for one call, it is used up for the run (``exhausted``): its calls fail, and a
        waterfall goes on."""
        unit = spec.cost.unit
        room = [ledger._purses[unit].room() for ledger in self._chain()]
        account = self._account(spec)
        if account is not None:
            left = max(0, account[0] - account[1])
            room.append(left)
            if worst and left < worst[0] and not account[1]:  # nothing in flight may give back
                self.exhaust(spec, _account_used_up(spec, account[0]))
        allowed, total = _fitting(worst, [r for r in room if r is not None])
        for ledger in self._chain():
            ledger._purses[unit].reserved += total
        if account is not None:
            account[1] += total
        return allowed

    def ask_balance(self, spec: ToolSpec) -> bool:
        """Whether to ask the provider what ``spec``'s account has left: once per run."""
        key = _balance_key(spec)
        accounts = self._root._accounts
        if key is None or key in accounts:
            return False
        accounts[key] = None
        return True

    def limit_account(self, spec: ToolSpec, left: float) -> None:
        """The provider says ``spec``'s account has ``left`` credits (in the units of the
        tool's declared cost): the run spends no more than that on the tools it counts."""
        key = _balance_key(spec)
        if key is not None:
            self._root._accounts[key] = [_exact(max(0.0, left)), 0]

    def _account(self, spec: ToolSpec) -> list[int] | None:
        accounts = self._root._accounts
        return accounts.get(_balance_key(spec) or "") if accounts else None

    def in_flight(self, spec: ToolSpec) -> bool:
        """Whether requests sent hold some of the budget of ``spec``'s unit."""
        return bool(self._purses[spec.cost.unit].reserved)

    def waits(self, spec: ToolSpec, worst: int) -> bool:
        """Whether a call to ``spec`` costing ``worst`` at most must wait for the requests
        in flight to settle: no budget has room for it now, and what is in flight may leave
        some."""
        unit = spec.cost.unit
        if worst <= 0 or not self._purses[unit].reserved:
            return False
        account = self._account(spec)
        if account is not None and account[1] and account[0] - account[1] < worst:
            return True
        return any(
            (room := ledger._purses[unit].room()) is not None and room < worst
            for ledger in self._chain()
        )

    def exceeded(self, spec: ToolSpec, worst: Sequence[int]) -> BudgetExceeded:
        """The error for the calls refused (``worst``: each one's): it names the budget
        that refused them."""
        unit = spec.cost.unit
        limited = [ledger for ledger in self._chain() if ledger._purses[unit].limit is not None]
        tight = min(limited, key=lambda g: g._purses[unit].room() or 0)
        purse = tight._purses[unit]
        limit = (purse.limit or 0) / _UNIT
        whose = "" if tight is self else f" of the parent run {tight._run_id}"
        spent, reserved, doubt = (purse.spent / _UNIT, purse.reserved / _UNIT, purse.in_doubt)
        money = unit == "usd"
        what = _amount(limit, money) if money else f"{limit:g} credits"
        doubted = f", {_amount(doubt / _UNIT, money)} in doubt (may have been charged)"
        return BudgetExceeded(
            f"Budget{whose} of {what} would be exceeded: {_amount(spent, money)} spent, "
            f"{_amount(reserved, money)} in flight{doubted if doubt else ''}, and "
            f"{len(worst)} more call(s) to {spec.id} may cost "
            f"{_amount(sum(worst) / _UNIT, money)}. Everything paid for so far is kept; raise "
            f"{'max_usd' if money else 'max_credits'} and resume the run to go on.",
            spent=spent,
            limit=limit,
            tool=spec.id,
        )

    def exhaust(self, spec: ToolSpec, error: ToolError) -> None:
        """The provider said ``spec``'s account can buy nothing more (``error.exhausted``: its
        quota or credits are used up). Its calls fail with that cause for the rest of the run
        and of its parent runs, unsent: every tool of the account, not only this one."""
        self._root._exhausted.setdefault(account_of(spec), error)

    def exhausted(self, spec: ToolSpec) -> ToolError | None:
        """Why calls to ``spec`` fail unsent (its account is used up), else None."""
        used_up = self._root._exhausted
        error = used_up.get(account_of(spec)) if used_up else None
        if error is None:
            return None
        return ToolError(
            spec.id,
            f"not sent: {error.tool} answered earlier in this run that the account can buy "
            f"nothing more ({error.provider_message})",
            status=error.status,
            code=error.code,
            outcome=error.outcome,
        )

    def doubt(self, worst: Mapping[str, float], unit: str = "credits") -> None:
        """Count the worst case of calls (receipt key -> amount in ``unit``) that may have
        been charged with no record: found in doubt when the attempt starts, or failed in
        doubt now. A parent's budget counts its children's (once: it may have found them
        itself)."""
        self._doubt({key: _exact(amount) for key, amount in worst.items()}, unit)

    def doubt_calls(self, spec: ToolSpec, inputs: Mapping[str, Mapping[str, Any]]) -> None:
        """``doubt`` the calls of ``spec`` (receipt key -> input) at their worst case."""
        worst = self.worst(spec, list(inputs.values()))
        self._doubt(dict(zip(inputs, worst, strict=True)), spec.cost.unit)

    def _doubt(self, worst: Mapping[str, int], unit: str) -> None:
        for ledger in self._chain():
            purse = ledger._purses[unit]
            for key, exact in worst.items():
                if key not in purse.doubtful:
                    purse.doubtful[key] = exact
                    purse.in_doubt += exact

    def resolve(self, key: str) -> None:
        """A call in doubt is sent again (its key tells the provider it is a repeat) or was
        answered meanwhile: what it costs is reserved and recorded as any other call's."""
        for ledger in self._chain():
            for purse in ledger._purses.values():
                if purse.doubtful:
                    purse.in_doubt -= purse.doubtful.pop(key, 0)

    def in_doubt_anywhere(self) -> bool:
        """Whether any call of the run may have been charged with no record, in any unit."""
        return any(purse.in_doubt for purse in self._purses.values())

    def release(self, spec: ToolSpec, reserved: int) -> None:
        """Give back ``reserved`` (exact: what ``reserve`` held) of calls never sent."""
        self.settle(spec, reserved, ())

    def settle(self, spec: ToolSpec, reserved: int, entries: Sequence[LedgerEntry]) -> None:
        """Replace ``reserved`` (exact) by the entries charged (the caller writes them, with
        the results they paid for)."""
        charged = sum(_exact(entry.credits) for entry in entries)
        account = self._account(spec)
        if account is not None:
            account[0] -= charged
            account[1] -= reserved
        unit = spec.cost.unit
        for ledger in self._chain():
            purse = ledger._purses[unit]
            purse.reserved -= reserved
            purse.spent += charged
            ledger.settles += 1
            if ledger._settled is not None:
                ledger._settled.set()

    def limited(self) -> bool:
        """Whether a budget is in force (this run's, or a parent's), in any unit."""
        return any(
            purse.limit is not None for ledger in self._chain() for purse in ledger._purses.values()
        )

    async def settled(self, since: int) -> None:
        """Wait until a reservation is settled past the ``since``-th (``settles`` read before
        the budget deferred a request): a call charged less than its worst case (a miss of
        an on-hit tool) leaves room for more. One settled meanwhile, even while the request
        was being claimed (a call answered at its claim), counts: nothing waits for a
        settlement that came already."""
        while self.settles <= since:
            if self._settled is None or self._settled.is_set():
                self._settled = asyncio.Event()
            await self._settled.wait()

    def entry(
        self,
        spec: ToolSpec,
        key: str,
        credits: float,
        found: bool,
        dataset: str | None,
        row_key: str | None,
        generation: int = 1,
        column: str | None = None,
    ) -> LedgerEntry:
        return LedgerEntry(
            run_id=self._run_id,
            tool=spec.id,
            receipt_key=key,
            credits=credits,
            found=found,
            at=self._clock.now(),
            dataset=dataset,
            row_key=row_key,
            generation=generation,
            column=column,
            unit=spec.cost.unit,
        )


class _Purse:
    """One unit's budget: its limit, what was spent, what requests in flight hold, and the
    worst case of the calls in doubt (all exact)."""

    __slots__ = ("doubtful", "in_doubt", "limit", "reserved", "spent")

    def __init__(self, limit: float | None, spent: float) -> None:
        self.limit = None if limit is None else _exact(limit)
        self.spent = _exact(spent)
        self.reserved = 0
        self.in_doubt = 0
        self.doubtful: dict[str, int] = {}  # receipt keys of the calls in doubt -> worst case

    def room(self) -> int | None:
        """What this budget has left (None: no budget)."""
        if self.limit is None:
            return None
        return self.limit - self.spent - self.reserved - self.in_doubt


def _fitting(worst: Sequence[int], rooms: Sequence[int]) -> tuple[int, int]:
    """How many of the first calls (each costing at most ``worst[i]``) fit in every room,
    and their total. A free call always fits."""
    if not rooms or not worst:
        return len(worst), sum(worst)
    room = min(rooms)
    if min(worst) == max(worst):  # one price (a tool's fixed cost): no loop
        each = worst[0]
        allowed = len(worst) if each <= 0 else max(0, min(len(worst), room // each))
        return allowed, each * allowed
    total = 0
    for allowed, each in enumerate(worst):
        if each > 0 and total + each > room:
            return allowed, total
        total += each
    return len(worst), total


def _amount(value: float, money: bool) -> str:
    return dollars_text(value) if money else f"{value:g}"


def _balance_key(spec: ToolSpec) -> str | None:
    """The balance ``spec`` spends: its account's, of the unit its provider counts it in
    (Hunter's searches and verifications are two); None when its provider says none."""
    balance = getattr(spec.transport, "balance", None)
    return None if balance is None else f"{account_of(spec)}/{balance.unit}"


def _account_used_up(spec: ToolSpec, left: int) -> ToolError:
    unit = spec.transport.balance.unit  # type: ignore[attr-defined]
    return ToolError(
        spec.id,
        f"the account has {max(0, left) / _UNIT:g} {unit} left, too few for another call at "
        f"{spec.cost.credits:g} (what its provider said when the run first called it, less "
        "what the run spent since): the run stops before the account runs out. Add credits "
        "and resume the run",
        code="account_used_up",
        outcome="insufficient_credits",
    )


_UNIT = 10**9  # credits are counted in billionths of a credit


def _exact(credits: float) -> int:
    """An amount of credits in billionths, exactly as written to 9 places: ``0.1`` is
    100,000,000 (the float's noise, below a billionth, rounds away)."""
    return round(credits * _UNIT)
