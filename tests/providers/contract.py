"""The contract every provider adapter keeps against its double (``playline sim --providers``).

A provider's test module subclasses ``Contract`` with its ``Case`` (which tool, how a person
of the simulated world is asked for, what its result must hold, what uses the account up);
the tests here then check, for that provider:

- found and not found (and, for a bulk tool, both in one request), each result in the one
  vocabulary with the provider's answer under ``raw``; the ledger equals what the double
  charged, and the double charged nothing twice;
- at the documented rate, no rate-limit answer (in virtual time: the double counts the
  run's clock); a storm of them slows the tool, and every row still completes;
- an account used up mid-run: its cells fail with the cause, naming the provider, and a
  waterfall goes on with its next step;
- a wrong key: the cells fail with the provider's own words, and the key is nowhere stored;
- an async job killed while pending: the resume polls it, and submits nothing again.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

import playline as pl
from playline.providers import named
from playline.sim import Simulator
from playline.sim._doubles import Double
from playline.sim._world import Person
from stores import wait_for_jobs

from virtual_clock import VirtualClock

KEY = "k-provider-double-0123456789abcdef"  # the doubles' key (long: the leak checks catch it)


@dataclass(frozen=True)
class Case:
    """One provider tool's contract."""

    tool: str  # "hunter.email_finder"
    ask: Callable[[Person], dict[str, Any]]  # the input asking for a person
    check: Callable[[Any, Person], None]  # asserts a found result is this person's
    used_up: Mapping[str, Any]  # double faults that leave the account this much
    used_up_outcome: str  # "quota_exhausted" or "insufficient_credits"
    found: Callable[[Double, Person], bool] = lambda double, person: double.knows(person)
    left: tuple[str, float] = ("credits", 42)  # a double fault, and what the account says then
    room: float = 2  # what the account has left when a run must stop before running out
    misses: bool = True  # some people are not found (a verifier answers everyone)
    people: int = 24  # how many people of the world the found/not-found test asks for
    rate_calls: int = 60  # how many calls the rate test sends (past the tightest window)
    job_route: str | None = None  # an async tool: the double's route that submits a job
    poll_route: str | None = None  # ... and the one that polls it
    extra_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def provider(self) -> str:
        return self.tool.split(".", 1)[0]


def people(count: int, offset: int = 0) -> list[Person]:
    from playline.sim._world import world_for

    return world_for(7).people[offset : offset + count]


def run_tool(
    case: Case,
    tools: Any,
    asked: Sequence[Person],
    store: str,
    *,
    double: Double | None = None,
    resolver: Callable[..., Any] | None = None,
    **options: Any,
) -> pl.RunResult:
    """A run of one column over ``asked`` (keyed by the people's ordinals) calling the tool;
    the ``double`` (in this process) counts its rate windows in the run's time."""

    async def call(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return (await ctx.tool(case.tool, dict(row["ask"]))).data

    @pl.play(name=f"contract-{case.provider}")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"n": p.ordinal, "ask": case.ask(p)} for p in asked]
        return await ctx.dataset("people", rows, key="n").with_column("out", resolver or call).run()

    clock = options.setdefault("clock", pl.ManualClock())
    if double is not None:
        double.clock = clock.monotonic
    return pl.run(
        play, {}, store=store, tools=tools if isinstance(tools, list) else [tools], **options
    )


class Contract:
    """Subclass with ``case = Case(...)``; the tests below run for it."""

    case: ClassVar[Case]

    @pytest.fixture
    def double(self, sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Double]:
        provider = named(self.case.provider)
        double = sim.double(self.case.provider)
        double.reset()
        # until a run in this process sets its own (a child's run, in a process of its own,
        # cannot), the time every run's ManualClock starts from: never an earlier test's
        # clock, stopped where that test left it, ahead of the next run's
        double.clock = pl.ManualClock().monotonic
        monkeypatch.setenv(provider.key, KEY)
        monkeypatch.setenv(provider.url_variable, f"{sim.url}/{provider.name}")
        for name, value in self.case.extra_env.items():
            monkeypatch.setenv(name, value)
        yield double
        double.reset()

    def tools(self) -> Any:
        return named(self.case.provider).tools()

    def test_found_and_not_found_charge_what_the_provider_charges(
        self, double: Double, tmp_path: Path
    ) -> None:
        case = self.case
        asked = people(case.people)
        result = run_tool(case, self.tools(), asked, f"sqlite:///{tmp_path}/s.db", double=double)

        assert result.status == "completed", (result.status, result.output and result.output.errors)
        cells = {row["n"]: row["out"] for row in result.output}
        found = [p for p in asked if case.found(double, p)]
        assert found and (len(found) < len(asked) or not case.misses), "both outcomes asked"
        for person in asked:
            if person in found:
                case.check(cells[person.ordinal], person)
                assert "raw" in cells[person.ordinal]
            else:
                assert cells[person.ordinal] is None, (person, cells[person.ordinal])
        assert double.duplicates == 0
        assert result.stats.credits == pytest.approx(double.charged)
        again = run_tool(case, self.tools(), asked, f"sqlite:///{tmp_path}/s.db", double=double)
        assert again.stats.credits == 0 and double.duplicates == 0  # receipts answer it all

    def test_the_documented_rate_meets_no_rate_limit_answer(self, double: Double) -> None:
        asked = people(self.case.rate_calls, offset=1000)

        result = run_tool(
            self.case, self.tools(), asked, "memory://", double=double, clock=VirtualClock()
        )

        assert result.status == "completed", (result.error, result.output and result.output.errors)
        assert double.throttled == 0
        assert sum(double.calls.values()) >= 1

    def test_a_storm_of_rate_limit_answers_slows_the_tool_and_it_recovers(
        self, double: Double
    ) -> None:
        double.storm = 6
        asked = people(12, offset=2000)

        result = run_tool(self.case, self.tools(), asked, "memory://", double=double)

        assert result.status == "completed", result.error
        assert double.storm == 0 and double.throttled >= 6
        assert all(row["out"] is not None or not self.case.found(double, p)
                   for row, p in zip(result.output, asked, strict=True))  # fmt: skip
        assert not result.stats.rows_failed

    def test_a_run_stops_before_the_account_runs_out(self, double: Double) -> None:
        """What the account endpoint says is left is a budget: the calls past it fail
        unsent, naming the provider, and the provider refuses nothing."""
        operation = self.case.tool.split(".", 1)[1]
        if self.tools()[operation].balance is None:
            return  # nothing says what is left: the provider's own refusal stops it
        setattr(double, self.case.left[0], self.case.room)
        asked = [p for p in people(60, offset=3000) if self.case.found(double, p)][:6]

        result = run_tool(self.case, self.tools(), asked, "memory://", double=double)

        assert result.output is not None, result.error
        failed = result.output.errors
        assert failed and {e.code for e in failed} == {"account_used_up"}
        assert all(e.tool == self.case.tool for e in failed)
        assert not double.refused, "the provider was never asked past what it has"

    def test_an_account_used_up_fails_its_cells_naming_the_provider_and_a_waterfall_goes_on(
        self, double: Double
    ) -> None:
        """The provider refuses mid-run (another program spent the account): its cells fail
        with its cause, and a waterfall goes on with its next step."""
        case = self.case
        asked = [p for p in people(60, offset=3000) if case.found(double, p)][:8]
        backup_calls: list[Any] = []

        @pl.tool("backup.find")
        def backup(input: dict[str, Any]) -> dict[str, Any]:
            backup_calls.append(input)
            return {"email": "backup@example.com"}

        waterfall = pl.Waterfall(
            "contract",
            output="email",
            steps=[pl.ToolStep("provider", case.tool), pl.ToolStep("backup", "backup.find")],
        )
        for name, value in case.used_up.items():
            setattr(double, name, value)
        plain = run_tool(case, self._unbalanced(), asked, "memory://", double=double)
        assert plain.output is not None, plain.error
        failed = plain.output.errors
        assert failed, "the account ran out: some cells must fail"
        assert {e.tool for e in failed} == {case.tool}
        meaning = _USED_UP[case.used_up_outcome]
        assert all(e.code == case.used_up_outcome or meaning in e.message for e in failed), failed
        assert double.duplicates == 0
        double.reset()
        for name, value in case.used_up.items():
            setattr(double, name, value)

        async def through(row: Mapping[str, Any], ctx: pl.Context) -> Any:
            return await ctx.waterfall(waterfall, dict(row["ask"]))

        fell = run_tool(
            case, [*self._unbalanced().specs(), backup], asked, "memory://", double=double,
            resolver=through,
        )  # fmt: skip
        assert fell.status == "completed", fell.error
        assert all(row["out"] is not None for row in fell.output)
        assert backup_calls, "the waterfall went on to its next step"

    def _unbalanced(self) -> Any:
        """The tools, not told what the account has left (the provider's answers tell)."""
        tools = self.tools()
        for _, tool in tools.operations():
            tool.balance = None
        return tools

    def test_a_wrong_key_fails_its_cells_with_the_provider_s_words(
        self, double: Double, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        wrong = "k-wrong-key-fedcba9876543210"
        monkeypatch.setenv(named(self.case.provider).key, wrong)
        store = f"sqlite:///{tmp_path}/s.db"

        result = run_tool(self.case, self.tools(), people(2), store, double=double)

        assert result.stats.rows_failed == 2
        stored = Path(f"{tmp_path}/s.db").read_bytes()
        assert wrong.encode() not in stored and KEY.encode() not in stored

    def test_a_key_pasted_with_spaces_and_a_line_end_works(
        self, double: Double, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`export KEY=$(cat key.txt)` keeps the file's line end: sent as it was, the header
        was illegal and every row failed, blamed on a secret leaked by the play."""
        monkeypatch.setenv(named(self.case.provider).key, f" {KEY}\n")
        asked = [p for p in people(40, offset=6000) if self.case.found(double, p)][:1]

        result = run_tool(self.case, self.tools(), asked, "memory://", double=double)

        assert result.status == "completed", (result.error, result.output and result.output.errors)

    def test_an_answer_cut_short_is_in_doubt_never_read_as_not_found(
        self, double: Double, tmp_path: Path
    ) -> None:
        """The provider did the work and may have charged: a provider that does not charge a
        repeat (``repeat_free``) is asked again at once; any other's call fails in doubt and
        is bought again only when asked. Never a miss kept on a receipt (which would hide the
        person for good)."""
        case = self.case
        asked = [p for p in people(40, offset=5000) if case.found(double, p)][:1]
        double.malformed = 1
        store = f"sqlite:///{tmp_path}/s.db"

        cut = run_tool(case, self.tools(), asked, store, double=double)

        if self.tools()[case.tool.split(".", 1)[1]].spec.in_doubt == "resend":
            assert cut.status == "completed", cut.output and cut.output.errors
            case.check(next(iter(cut.output))["out"], asked[0])
            assert double.duplicates == 0
            # the cut answer was charged, the repeat free (Prospeo says so): the ledger holds
            # the one charge the provider made
            assert double.charged > 0 and cut.stats.credits == pytest.approx(double.charged)
            return
        assert cut.output is not None and [e.code for e in cut.output.errors] == ["in_doubt"]
        assert "not JSON (cut short?)" in cut.output.errors[0].message
        kept = run_tool(case, self.tools(), asked, store, double=double, run_id=cut.run_id)
        assert kept.status == "failed"  # a resume does not buy it again unasked
        again = run_tool(
            case, self.tools(), asked, store, double=double, run_id=cut.run_id, retry_in_doubt=True
        )
        assert again.status == "completed", again.error
        case.check(next(iter(again.output))["out"], asked[0])

    def test_the_account_says_what_is_left(self, double: Double) -> None:
        provider = named(self.case.provider)
        if provider.balance is None:
            assert self.tools().remaining() is None
            return
        name, left = self.case.left
        setattr(double, name, left)
        assert self.tools().remaining() == pytest.approx(left)
        with pytest.raises(PermissionError, match=provider.key):
            provider.tools(api_key="k-wrong-key-fedcba9876543210").remaining()


_USED_UP = {  # what a cell's error says when the account is used up (its code may be the
    # provider's own)
    "quota_exhausted": "the account's quota is used up",
    "insufficient_credits": "the account is out of credits",
}


class JobContract(Contract):
    """The contract of a tool whose provider answers with a job to poll."""

    def test_a_job_killed_while_pending_is_polled_on_resume_never_submitted_again(
        self, sim: Simulator, double: Double, tmp_path: Path
    ) -> None:
        case = self.case
        assert case.job_route is not None, "an async tool's case names its job routes"
        double.pending_polls = 10**6  # pending until the test says
        store = f"sqlite:///{tmp_path}/s.db"
        asked = [p for p in people(40, offset=4000) if case.found(double, p)][:3]
        script = tmp_path / "child.py"
        script.write_text(
            CHILD.format(
                here=str(Path(__file__).parent),
                tests=str(Path(__file__).parent.parent),
                module=sys.modules[type(self).__module__].__file__,
                cls=type(self).__name__,
                ordinals=[p.ordinal for p in asked],
            )
        )
        child = subprocess.Popen([sys.executable, str(script), store], stderr=subprocess.PIPE)
        try:
            wait_for_jobs(Path(f"{tmp_path}/s.db"), child, len(asked))
        finally:
            child.kill()
            child.communicate()
        submitted = double.calls[case.job_route]
        assert submitted >= 1
        double.pending_polls = 1

        result = run_tool(case, self.tools(), asked, store, double=double, run_id="run-jobs")

        assert result.status == "completed", result.error
        assert double.calls[case.job_route] == submitted  # polled, never submitted again
        assert double.calls[case.poll_route or ""] >= 1
        for row, person in zip(result.output, asked, strict=True):
            case.check(row["out"], person)
        assert double.duplicates == 0


# a run of the contract's tool in a process of its own, to be killed
CHILD = """
import importlib.util
import sys

sys.path[:0] = [{here!r}, {tests!r}]
from contract import run_tool
from playline.providers import named
from playline.sim._world import world_for

spec = importlib.util.spec_from_file_location("contract_case", {module!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
case = getattr(module, {cls!r}).case
asked = [world_for(7).people[n] for n in {ordinals!r}]
run_tool(case, named(case.provider).tools(), asked, sys.argv[1], run_id="run-jobs")
"""
