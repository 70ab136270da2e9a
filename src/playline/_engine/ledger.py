"""The credit ledger: what every live call cost, and the budget that stops spending."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from .._clock import Clock
from ..errors import BudgetExceeded, ToolError
from ..store import LedgerEntry
from ..tools import ToolSpec
from ..tools._declared import account_of

__all__ = ["Ledger"]


class Ledger:
    """Credits spent by a run; with ``max_credits``, calls that could pass it are refused.

    Just before a request is sent, the worst-case cost of each of its inputs is reserved (a
    request that does not fit whole is shrunk to the inputs that do); after it returns the
    reservation is replaced by what was charged. So concurrent requests can never overspend
    together, and a budget fills rows up to the cap.

    A call that may have been charged with no record of it (it failed in doubt, or its
    process died with the request out) keeps its worst case counted, ``in_doubt``, until a
    later send of it settles (a re-send with its idempotency key records what it cost): a slow
    provider, or a crash, never lets the budget be spent twice.

    Credits are counted exactly, in whole billionths of a credit (``Cost(0.1)`` is 100,000,000
    of them, not the float next to a tenth): the reservations given back leave exactly nothing
    in flight, and a budget of 1 holds ten calls of 0.1, with no epsilon; integers, so a call
    costs the hot path no more than floats did. (In floats, 0.3 and
    0.7 reserved and given back left ``-1.11022e-16 in flight`` in the budget's message.)
    """

    def __init__(
        self,
        run_id: str,
        clock: Clock,
        *,
        max_credits: float | None = None,
        spent: float = 0.0,
        parent: Ledger | None = None,
    ) -> None:
        self._run_id = run_id
        self._clock = clock
        self.max_credits = max_credits
        self._limit = None if max_credits is None else _exact(max_credits)
        # what earlier attempts spent is the store's sum of floats, so it may carry their
        # noise (0.1 + 0.2 + 0.3 = 0.6000000000000001): rounded to the billionth of a credit
        self._spent = _exact(spent)
        self._reserved = 0
        self._in_doubt = 0  # worst case of the calls that may have been charged
        self._doubtful: dict[str, int] = {}  # their receipt keys -> worst case
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
        return self._spent / _UNIT

    @property
    def reserved(self) -> float:
        """The worst case of the requests sent and not yet settled (in flight)."""
        return self._reserved / _UNIT

    @property
    def in_doubt(self) -> float:
        """The worst case of the calls that may have been charged with no record of it."""
        return self._in_doubt / _UNIT

    def _room(self) -> int | None:
        """Credits this budget has left (None: no budget)."""
        if self._limit is None:
            return None
        return self._limit - self._spent - self._reserved - self._in_doubt

    def _chain(self) -> list[Ledger]:
        chain: list[Ledger] = []
        ledger: Ledger | None = self
        while ledger is not None:
            chain.append(ledger)
            ledger = ledger.parent
        return chain

    def reserve(self, spec: ToolSpec, calls: int) -> int:
        """Reserve the worst-case cost of as many of ``calls`` as every budget in force
        allows (this run's and its parents', and what the provider account has left);
        returns how many may be sent. When the account has no room for one call, it is
        used up for the run (``exhausted``): its calls fail, and a waterfall goes on."""
        each = _exact(spec.cost.credits)
        allowed = calls
        account = self._account(spec)
        if each > 0:
            for ledger in self._chain():
                room = ledger._room()
                if room is not None:
                    allowed = max(0, min(allowed, room // each))
            if account is not None:
                left = max(0, account[0] - account[1])
                allowed = min(allowed, left // each)
                if left < each and not account[1]:  # nothing in flight may give some back
                    self.exhaust(spec, _account_used_up(spec, account[0]))
        for ledger in self._chain():
            ledger._reserved += each * allowed
        if account is not None:
            account[1] += each * allowed
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

    def waits(self, spec: ToolSpec) -> bool:
        """Whether a call to ``spec`` must wait for the requests in flight to settle: no
        budget has room for its worst case now, and what is in flight may leave some."""
        each = _exact(spec.cost.credits)
        if each <= 0 or not self._reserved:
            return False
        account = self._account(spec)
        if account is not None and account[1] and account[0] - account[1] < each:
            return True
        return any((room := ledger._room()) is not None and room < each for ledger in self._chain())

    def exceeded(self, spec: ToolSpec, calls: int) -> BudgetExceeded:
        """The error for ``calls`` refused: it names the budget that refused them."""
        limited = [ledger for ledger in self._chain() if ledger.max_credits is not None]
        tight = min(limited, key=lambda g: g._room() or 0)
        limit = tight.max_credits or 0.0
        whose = "" if tight is self else f" of the parent run {tight._run_id}"
        doubt = f", {tight.in_doubt:g} in doubt (may have been charged)" if tight.in_doubt else ""
        worst = _exact(spec.cost.credits) * calls / _UNIT
        return BudgetExceeded(
            f"Budget{whose} of {limit:g} credits would be exceeded: {tight.spent:g} spent, "
            f"{tight.reserved:g} in flight{doubt}, and {calls} more call(s) to {spec.id} may cost "
            f"{worst:g}. Everything paid for so far is kept; raise "
            "max_credits and resume the run to go on.",
            spent=tight.spent,
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

    def doubt(self, credits: Mapping[str, float]) -> None:
        """Count the worst case of calls (receipt key -> credits) that may have been charged
        with no record: found in doubt when the attempt starts, or failed in doubt now. A
        parent's budget counts its children's (once: it may have found them itself)."""
        for ledger in self._chain():
            for key, worst in credits.items():
                if key not in ledger._doubtful:
                    exact = ledger._doubtful[key] = _exact(worst)
                    ledger._in_doubt += exact

    def resolve(self, key: str) -> None:
        """A call in doubt is sent again (its key tells the provider it is a repeat) or was
        answered meanwhile: what it costs is reserved and recorded as any other call's."""
        for ledger in self._chain():
            if ledger._doubtful:
                ledger._in_doubt -= ledger._doubtful.pop(key, 0)

    def release(self, spec: ToolSpec, reserved: int) -> None:
        """Give back the reservation of ``reserved`` inputs that were never sent."""
        self.settle(spec, reserved, ())

    def settle(self, spec: ToolSpec, reserved: int, entries: Sequence[LedgerEntry]) -> None:
        """Replace the reservation of ``reserved`` calls by the entries charged (the caller
        writes them, with the results they paid for)."""
        charged = sum(_exact(entry.credits) for entry in entries)
        given_back = _exact(spec.cost.credits) * reserved
        account = self._account(spec)
        if account is not None:
            account[0] -= charged
            account[1] -= given_back
        for ledger in self._chain():
            ledger._reserved -= given_back
            ledger._spent += charged
            ledger.settles += 1
            if ledger._settled is not None:
                ledger._settled.set()

    def limited(self) -> bool:
        """Whether a budget is in force (this run's, or a parent's)."""
        return any(ledger.max_credits is not None for ledger in self._chain())

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
        )


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
