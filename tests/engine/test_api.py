"""The public facade (API.md): names, errors, running, results."""

from __future__ import annotations

import asyncio
import csv
import inspect
import math
import re
import uuid
import warnings

import pytest

import playline as pl
import playline.errors
import playline.store
from playline.store import Store, open_store

from .helpers import call_tool, dataset_play, rows_of, run_dataset, run_play


@pytest.fixture
def anyio_backend():
    return "asyncio"


# --- the facade -------------------------------------------------------------------------


def test_all_is_sorted_unique_and_every_name_exists():
    assert pl.__all__ == sorted(set(pl.__all__))
    missing = [name for name in pl.__all__ if not hasattr(pl, name)]
    assert missing == []


@pytest.mark.parametrize(
    "name",
    [
        "play",
        "run",
        "arun",
        "tool",
        "Context",
        "Rate",
        "Cost",
        "Batch",
        "ToolRegistry",
        "ToolResult",
        "Dataset",
        "RunResult",
        "ManualClock",
        "PlaylineError",
        "PlayDefinitionError",
        "ToolError",
        "BudgetExceeded",
        "GovernanceError",
        "StoreError",
    ],
)
def test_the_contract_names_are_exported(name):
    assert name in pl.__all__


def exception_classes():
    namespaces = (vars(pl), vars(playline.errors))
    found = {v for ns in namespaces for v in ns.values() if inspect.isclass(v)}
    return sorted((c for c in found if issubclass(c, BaseException)), key=lambda c: c.__name__)


@pytest.mark.parametrize("error", exception_classes(), ids=lambda c: c.__name__)
def test_every_error_is_a_playline_error(error):
    assert issubclass(error, pl.PlaylineError)


def test_a_tool_error_carries_its_context():
    error = pl.ToolError("t.x", "slow down", status=429, code="rate", request_id="req-1")

    assert (error.tool, error.status, error.code, error.request_id) == ("t.x", 429, "rate", "req-1")
    assert all(part in str(error) for part in ("t.x", "429", "slow down", "rate", "req-1"))


# --- running ----------------------------------------------------------------------------


async def trivial(ctx, input):
    return {"echo": input}


def test_run_refuses_a_running_event_loop():
    async def inside():
        with pytest.raises(pl.PlayDefinitionError, match=r"await pl\.arun"):
            pl.run(trivial, 1, tools=[])

    asyncio.run(inside())


@pytest.mark.parametrize(
    ("called", "option", "says"),
    [
        ("run", "max_credit", "did you mean max_credits?"),
        ("plan", "row_windw", "did you mean row_window?"),
        ("arun", "max_credit", "did you mean max_credits?"),
        ("aplan", "storee", "did you mean store?"),
        ("run", "zzz", "it takes store, run_id, tools, max_credits, "),
    ],
)
def test_an_unknown_option_names_the_function_called_and_the_closest_options(called, option, says):
    """It was a TypeError naming arun or aplan, which the user had not called, and no option
    close to the typo."""
    call = getattr(pl, called)
    with pytest.raises(pl.PlayDefinitionError) as caught:
        if called.startswith("a"):
            asyncio.run(call(trivial, {}, **{option: 5}))
        else:
            call(trivial, {}, **{option: 5})
    assert str(caught.value).startswith(f"pl.{called}() has no option {option}=: {says}")


@pytest.mark.anyio
async def test_arun_is_the_async_twin():
    result = await pl.arun(trivial, 1, tools=[], clock=pl.ManualClock())

    assert (result.status, result.output) == ("completed", {"echo": 1})


def test_a_run_result_reports_its_run():
    result = run_play(trivial, {"a": 1}, tools=[])

    assert result.ok
    assert result.run_id.startswith("run_")
    assert (result.status, result.output, result.error) == ("completed", {"echo": {"a": 1}}, None)
    for name in (
        "rows",
        "rows_executed",
        "rows_reused",
        "rows_failed",
        "tool_calls_live",
        "tool_calls_cached",
        "tool_calls_in_flight",
        "credits",
    ):
        assert result.stats[name] == 0


def test_a_play_that_raises_fails_its_run():
    async def broken(ctx, input):
        raise ValueError("bad input")

    result = run_play(broken, tools=[])

    assert not result.ok
    assert (result.status, result.output) == ("failed", None)
    assert result.error == "ValueError: bad input"
    assert isinstance(result.exception, ValueError)


def test_a_return_value_that_is_not_json_fails_the_run(store):
    async def returns_a_set(ctx, input):
        return {1, 2}

    result = run_play(returns_a_set, tools=[], store=store)

    assert result.status == "failed"
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert store.get_run(result.run_id).status == "failed"


def test_a_play_is_named_after_its_function_and_runs_by_name():
    @pl.play
    async def enrich_leads_for_api_test(ctx, input):
        return ctx.play_name

    assert enrich_leads_for_api_test.name == "enrich-leads-for-api-test"
    result = run_play("enrich-leads-for-api-test", tools=[])
    assert result.output == "enrich-leads-for-api-test"


def test_a_play_must_be_async():
    with pytest.raises(pl.PlayDefinitionError, match="async def"):

        @pl.play
        def not_async(ctx, input):
            return None


def test_resuming_a_run_of_another_play_is_refused(store):
    async def other(ctx, input):
        return None

    first = run_play(trivial, tools=[], store=store)

    with pytest.raises(pl.PlayDefinitionError, match="belongs to play"):
        run_play(other, tools=[], store=store, run_id=first.run_id)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"store": "nosuch://x"}, pl.StoreError),
        ({"row_window": 0}, pl.PlayDefinitionError),
        ({"run_id": "  "}, pl.PlayDefinitionError),
        ({"tools": [object()]}, pl.PlayDefinitionError),
        ({"max_credits": float("inf")}, pl.PlayDefinitionError),
        ({"max_credits": float("nan")}, pl.PlayDefinitionError),
        ({"foreground_sleep": float("nan")}, pl.PlayDefinitionError),
        ({"lease": float("inf")}, pl.PlayDefinitionError),
        ({"store": 3}, pl.StoreError),
        ({"store": ""}, pl.StoreError),
        ({"store": b"sqlite:///x.db"}, pl.StoreError),
        ({"store": "sqlite:///t\x00.db"}, pl.StoreError),
        ({"clock": 3}, pl.PlayDefinitionError),
        ({"listeners": print}, pl.PlayDefinitionError),
        ({"listeners": [3]}, pl.PlayDefinitionError),
        ({"tools": 3}, pl.PlayDefinitionError),
        ({"tools": "t.tool"}, pl.PlayDefinitionError),
        ({"refresh": 5}, pl.PlayDefinitionError),
        ({"retry_failed": "no"}, pl.PlayDefinitionError),
        ({"retry_failed": 1}, pl.PlayDefinitionError),
        ({"retry_in_doubt": "no"}, pl.PlayDefinitionError),
        ({"retry_in_doubt": None}, pl.PlayDefinitionError),
        ({"stall_after": "10"}, pl.PlayDefinitionError),
        ({"stall_after": 0}, pl.PlayDefinitionError),
        ({"stall_after": float("nan")}, pl.PlayDefinitionError),
    ],
    ids=[
        "store-url",
        "row-window",
        "run-id",
        "tools",
        "inf-credits",
        "nan-credits",
        "nan-sleep",
        "inf-lease",
        "store-int",
        "store-empty",
        "store-bytes",
        "store-nul",
        "clock",
        "listeners-function",
        "listeners-int",
        "tools-int",
        "tools-str",
        "refresh-int",
        "retry-failed-str",
        "retry-failed-int",
        "retry-in-doubt-str",
        "retry-in-doubt-none",
        "stall-after-str",
        "stall-after-zero",
        "stall-after-nan",
    ],
)
def test_bad_run_options_are_refused(options, error):
    with pytest.raises(error):
        run_play(trivial, **{"tools": [], **options})


@pytest.mark.parametrize("option", ["retry_failed", "retry_in_doubt"])
def test_a_yes_or_no_run_option_given_as_text_is_refused_naming_it(option, store):
    with pytest.raises(pl.PlayDefinitionError, match=f"^{option}='no' must be True or False"):
        run_play(trivial, tools=[], store=store, **{option: "no"})
    assert store.list_runs() == []  # refused before a run was opened


def test_a_second_stop_ends_the_run_at_once_leaving_its_call_in_doubt(registry, store):
    """The first stop waits for the calls in flight; cancelling the run (a second Ctrl-C) does
    not: a call that never answers does not hold the process."""

    async def main():
        sent = asyncio.Event()

        @registry.tool("t.never_answers")
        async def never_answers(input):
            sent.set()
            await asyncio.Event().wait()

        async def play(ctx, input):
            return await ctx.tool("t.never_answers", {"x": 1})

        stop = asyncio.Event()
        run = asyncio.ensure_future(pl.arun(play, tools=[registry], store=store, stop=stop))
        await sent.wait()
        stop.set()  # the first stop: waits for the call, which never answers
        run.cancel()  # the second
        # (a bound only so that the old behaviour, a hang, fails the test instead of hanging)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, timeout=60)

    asyncio.run(main())
    assert store.receipt_stats()["t.never_answers"]["running"] == 1  # in doubt, for a resume


def test_tools_that_cannot_make_a_tool_table_are_refused_before_the_run():
    cheap, dear, other, self_bulk, loop_a, loop_b = (pl.ToolRegistry() for _ in range(6))
    cheap.tool("t.same", cost=1)(lambda input: {})
    dear.tool("t.same", cost=100)(lambda input: {})
    other.tool("t.same", cost=1)(lambda input: {"another": "function"})
    self_bulk.tool("t.self", batch=pl.Batch(max_size=5, via="t.self"))(lambda inputs: inputs)
    loop_a.tool("t.a", batch=pl.Batch(max_size=5, via="t.b"))(lambda inputs: inputs)
    loop_b.tool("t.b", batch=pl.Batch(max_size=5, via="t.a"))(lambda inputs: inputs)
    cases = {
        "different cost": [cheap, dear],
        "different function": [cheap, other],
        "not a batch tool": [self_bulk],
        "no via= of its own": [loop_a, loop_b],
        "pass a list": "t.same",
    }
    for message, tools in cases.items():
        with pytest.raises(pl.PlayDefinitionError) as caught:
            run_play(trivial, tools=tools)
        assert message.split()[-1] in str(caught.value), (message, caught.value)
    assert run_play(trivial, tools=[cheap, cheap]).status == "completed"  # the same one twice
    for via in ("", 3):
        with pytest.raises(pl.PlayDefinitionError, match="names the batch tool"):
            pl.Batch(max_size=5, via=via)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"rate": 5}, "rate=5"),
        ({"batch": 10}, "batch=10"),
        ({"cost": "1"}, "cost='1'"),
        ({"outputs": ["a"]}, "outputs="),
        ({"outputs": {"a": 1}}, "outputs['a']"),
        ({"lists": ["a"]}, "lists="),
    ],
)
def test_tool_options_of_the_wrong_kind_are_refused_where_the_tool_is_defined(
    registry, options, named
):
    with pytest.raises(pl.PlayDefinitionError) as caught:
        registry.tool("t.odd", **options)
    assert named in str(caught.value)
    with pytest.raises(pl.PlayDefinitionError, match="per_second"):
        pl.Rate(per_second="5")


def test_functions_that_cannot_take_their_arguments_are_refused_where_they_are_defined(registry):
    async def one_argument(ctx):
        return None

    cases = [
        (lambda: pl.play(name="one-arg")(one_argument), "(ctx, input)"),
        (lambda: registry.tool("t.none")(lambda: {}), "(input)"),
        (lambda: registry.tool("t.bulk", batch=pl.Batch(max_size=5))(lambda: []), "(inputs)"),
        (lambda: pl.ToolStep("s", "t.x", map_input=lambda a, b: a), "(input) -> dict"),
    ]
    for define, form in cases:
        with pytest.raises(pl.PlayDefinitionError, match=re.escape(form)):
            define()

    async def play(ctx, input):
        return await ctx.step("s", lambda x: 1)

    result = run_play(play, tools=[])
    assert isinstance(result.exception, pl.PlayDefinitionError) and "fn must take" in result.error


def test_a_code_step_may_take_its_input_alone(registry):
    spec = pl.Waterfall(
        "code-alone", output="v", steps=[pl.CodeStep("double", lambda input: {"v": input["n"] * 2})]
    )

    async def play(ctx, input):
        return await ctx.waterfall(spec, {"n": 21})

    assert run_play(play, tools=[]).output == 42


def test_rows_given_as_one_dict_are_refused():
    async def play(ctx, input):
        await ctx.dataset("d", {"a": 1}).with_column("x", lambda row: 1).run()

    result = run_play(play, tools=[])
    assert isinstance(result.exception, pl.PlayDefinitionError) and "not dict" in result.error


@pytest.mark.parametrize("credits", [float("nan"), float("inf"), -1, "5"])
def test_a_play_budget_that_is_no_amount_is_refused(credits):
    with pytest.raises(pl.PlayDefinitionError, match="must be a number >= 0"):
        pl.play(name="bad-budget", max_credits=credits)(trivial)


@pytest.mark.parametrize("interval", [0, -1, float("nan"), "1", 0.001])
def test_a_worker_interval_that_is_no_pause_is_refused(interval):
    with pytest.raises(pl.PlayDefinitionError, match="seconds between checks"):
        pl.Worker(store="memory://", interval=interval)


def _paid_tool(registry):
    """Registers t.paid (1 credit a call); returns the inputs it was sent."""
    sent = []

    @registry.tool("t.paid", cost=1)
    def paid(input):
        sent.append(input)
        return {"v": 1}

    return sent


@pytest.mark.parametrize(
    ("options", "named"),
    [({"force": "false"}, "force="), ({"force": 1}, "force="), ({"key": [3]}, "key=")],
)
def test_ctx_tool_options_of_the_wrong_type_are_refused(registry, options, named):
    sent = _paid_tool(registry)

    async def play(ctx, input):
        await ctx.tool("t.paid", {"x": 1}, **options)

    result = run_play(play, tools=[registry])
    assert isinstance(result.exception, pl.PlayDefinitionError) and named in result.error
    assert sent == []  # refused before anything was bought


def test_force_may_be_a_numpy_boolean_as_a_pandas_row_holds_it(registry):
    import numpy  # installed with pandas, which the tests need

    sent = _paid_tool(registry)

    async def play(ctx, input):
        await ctx.tool("t.paid", {"x": 1})
        await ctx.tool("t.paid", {"x": 1}, force=numpy.bool_(False))  # from the receipt
        await ctx.tool("t.paid", {"x": 1}, force=numpy.bool_(True))  # bought again

    result = run_play(play, tools=[registry])
    assert result.status == "completed", result.error
    assert len(sent) == 2


def test_a_run_whose_every_row_failed_names_the_cause():
    rows = [{"email": f"{n}@x.io"} for n in range(3)]
    result = run_dataset(rows, {"domain": lambda row: row["emial"].split("@")[1]}, tools=[])
    assert result.status == "failed"
    assert "All 3 rows failed: 3 x KeyError in column 'domain': 'emial'." in result.error


def test_a_run_whose_every_row_failed_counts_the_failed_calls_of_its_cause_as_calls(registry):
    """Two calls a row: "All 2 rows failed: 4 x 422" counted calls as if they were rows."""

    @registry.tool("t.picky")
    def picky(input):
        raise pl.ToolError("t.picky", "no such record", status=422, code="invalid")

    async def both(row, ctx):
        return await asyncio.gather(
            *(ctx.tool("t.picky", {"x": row["x"], "side": s}) for s in "ab")
        )

    result = run_dataset(rows_of(2), {"ab": both}, tools=[registry])
    assert result.status == "failed"
    assert "All 2 rows failed: 4 calls failed with 422 from t.picky (invalid)." in result.error


def test_a_run_whose_every_row_returned_what_cannot_be_stored_names_the_cause():
    result = run_dataset([{"a": 1}, {"a": 2}], {"b": lambda row: {1, 2}}, tools=[], key="a")
    assert result.status == "failed"
    assert (
        "All 2 rows failed: 2 x unstorable value in column 'b': Column 'b' returned a set, "
        "which cannot be stored." in (result.error or "")
    )
    assert result.stats.cell_errors == {
        "unstorable value in column 'b': Column 'b' returned a set, which cannot be stored. "
        "Return plain dicts, lists, strings, numbers, booleans or None.": 2
    }


def test_a_cause_that_ends_its_sentence_ends_the_runs_error_once():
    result = run_dataset([{"a": 1}], {"b": lambda row: {1, 2}}, tools=[], key="a")
    assert result.status == "failed"
    assert (result.error or "").endswith(
        "Return plain dicts, lists, strings, numbers, booleans or None."
    )
    assert not (result.error or "").endswith("..")


def test_a_column_value_whose_keys_collide_as_json_text_fails_its_cell():
    def keyed(row):
        return {1: "a", "1": "b"} if row["x"] == 1 else {1: "a"}

    result = run_dataset([{"x": 1}, {"x": 2}], {"c": keyed}, tools=[], key="x")

    assert result.status == "completed_with_errors", result.error
    (error,) = result.output.errors
    assert (error.row_key, error.column) == ("1", "c")
    assert "cannot be stored" in error.message
    assert "its keys 1 and '1'" in error.message and "returned a dict" not in error.message
    assert result.output.to_list() == [{"x": 1, "c": None}, {"x": 2, "c": {"1": "a"}}]


def test_a_number_names_a_call_as_its_text(registry):
    registry.tool("t.named")(lambda input: {"v": 1})

    async def play(ctx, input):
        return (await ctx.tool("t.named", {"x": 1}, key=7)).data

    assert run_play(play, tools=[registry]).output == {"v": 1}


def test_a_nan_key_is_a_missing_key_not_a_duplicate():
    rows = [{"email": "a@x.io"}, {"email": float("nan")}, {"email": float("nan")}]
    result = run_dataset(rows, {"n": lambda row: 1}, tools=[], key="email")
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "2 rows have no key: row 2: key 'email' is NaN (an empty cell) in {'email': nan}; " in (
        result.error or ""
    )  # each named (from 1) and shown: the second NaN is no duplicate of the first


# --- tools ------------------------------------------------------------------------------


def test_pl_tool_defines_a_tool_usable_in_tools():
    tool_id = f"t.global-{uuid.uuid4().hex[:8]}"

    @pl.tool(tool_id, cost=2)
    def lookup(input):
        return {"v": input["x"]}

    async def play(ctx, input):
        result = await ctx.tool(tool_id, {"x": 3})
        return [result.data, result.cost]

    assert run_play(play, tools=[lookup]).output == [{"v": 3}, 2.0]


def test_an_unknown_tool_names_the_close_matches(registry):
    @registry.tool("t.company")
    def company(input):
        return {}

    async def play(ctx, input):
        await ctx.tool("t.compnay", {})

    result = run_play(play, tools=[registry])

    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "t.company" in result.error


def test_a_tool_input_must_be_a_dict(registry):
    @registry.tool("t.any")
    def any_(input):
        return {}

    async def play(ctx, input):
        await ctx.tool("t.any", ["not", "a", "dict"])

    result = run_play(play, tools=[registry])

    assert isinstance(result.exception, pl.PlayDefinitionError)


# --- datasets ---------------------------------------------------------------------------


def test_a_dataset_is_sized_iterable_and_exportable(tmp_path):
    result = run_dataset(rows_of(3), {"tags": lambda row: ["a", row["x"]]}, tools=[])
    ds = result.output

    assert len(ds) == 3
    assert list(ds) == ds.to_list() == [{"x": i, "tags": ["a", i]} for i in range(3)]
    assert ds.stats.rows_executed == 3
    assert ds.errors == []
    path = ds.to_csv(tmp_path / "out.csv")
    with path.open(newline="") as handle:
        assert list(csv.DictReader(handle)) == [
            {"x": str(i), "tags": f'["a",{i}]'} for i in range(3)
        ]


def test_to_csv_writes_a_text_a_spreadsheet_would_run_with_a_quote_unless_raw(tmp_path):
    """A provider's answer may hold ``=HYPERLINK(...)``: the CSV a user opens in a
    spreadsheet shows it as text, as ``playline export`` writes it."""
    formula = '=HYPERLINK("http://evil.example","x")'
    result = run_dataset(rows_of(1), {"@note": lambda row: formula}, tools=[])

    def written(**raw: bool) -> list[dict[str, str]]:
        with result.output.to_csv(tmp_path / "out.csv", **raw).open(newline="") as handle:
            return list(csv.DictReader(handle))

    assert written() == [{"x": "0", "'@note": "'" + formula}]
    assert written(raw=True) == [{"x": "0", "@note": formula}]
    with pytest.raises(pl.PlayDefinitionError, match="raw is True"):
        written(raw="yes")  # type: ignore[arg-type]


def test_a_dataset_run_never_awaited_fails_the_run_saying_to_await_it():
    """The run completed, its dataset never ran, and only a RuntimeWarning said so."""
    registry, paid = pl.ToolRegistry(), []

    @registry.tool("t.paid", cost=pl.Cost(1))
    def buy(input):
        paid.append(input)
        return {"ok": True}

    @pl.play(name="forgot-await")
    async def play(ctx: pl.Context, input: object) -> int:
        ctx.dataset("rows", [{"a": 1}]).with_column(
            "x", lambda row, ctx: ctx.tool("t.paid", {"a": row["a"]})
        ).run()
        return 1

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine ... was never awaited" left behind
        result = pl.run(play, {}, store="memory://", tools=[registry])

    assert result.status == "failed"
    assert "never awaited the run of dataset(s) 'rows'" in (result.error or "")
    assert "await ctx.dataset(...)...run()" in (result.error or "")
    assert paid == []


def test_a_play_returning_a_builder_or_an_awaitable_is_told_to_await_it():
    """It said "The play's return value is not JSON-serialisable (DatasetBuilder)"."""

    @pl.play(name="returns-builder")
    async def builder(ctx: pl.Context, input: object) -> object:
        return ctx.dataset("rows", [{"a": 1}]).with_column("x", lambda row: 1)

    @pl.play(name="returns-call")
    async def call(ctx: pl.Context, input: object) -> object:
        return ctx.tool("t.free", {"a": 1})

    registry = pl.ToolRegistry()
    registry.tool("t.free")(lambda input: {"ok": True})
    for play, kind in ((builder, "DatasetBuilder"), (call, "")):
        result = pl.run(play, {}, store="memory://", tools=[registry])
        assert result.status == "failed"
        assert f"The play returned a {kind}" in (result.error or "")
        assert "await it" in (result.error or "")


def test_a_ctx_kept_past_its_run_refuses_to_work(tmp_path):
    """On SQLite it hung for ever on the closed store; on memory:// it wrote to an ended
    run."""
    kept: list[pl.Context] = []

    @pl.play(name="keeper")
    async def keeper(ctx: pl.Context, input: object) -> int:
        kept.append(ctx)
        return 1

    assert pl.run(keeper, {}, store=f"sqlite:///{tmp_path}/k.db").status == "completed"
    (ctx,) = kept
    with pytest.raises(pl.PlayDefinitionError, match="whose attempt has ended"):
        asyncio.run(ctx.dataset("late", [{"a": 1}]).with_column("x", lambda row: 1).run())
    with pytest.raises(pl.PlayDefinitionError, match="whose attempt has ended"):
        ctx.log("late")


def _spy_on_opened_stores(monkeypatch: pytest.MonkeyPatch) -> list[Store]:
    opened: list[Store] = []

    def spy(url: str | Store | None, *, read_only: bool = False) -> Store:
        store = open_store(url, read_only=read_only)
        opened.append(store)
        return store

    monkeypatch.setattr(playline.store, "open_store", spy)
    return opened


def test_a_store_opened_from_its_url_is_closed_when_the_run_ends(durable_store_url, monkeypatch):
    """A run closes the store it opened from a URL: none of its connections or threads waits
    for the collector (30 runs in one process once left 30 connections open). A dataset in
    the result reads its rows through the store opened again. A store given open stays
    open: it is the caller's."""
    opened = _spy_on_opened_stores(monkeypatch)
    columns = {"twice": lambda row: row["x"] * 2, "bad": lambda row: 1 / row["x"]}
    result = run_dataset(rows_of(3), columns, tools=[], store=durable_store_url)

    assert [store.closed for store in opened] == [True]
    assert [row["twice"] for row in result.output] == [0, 2, 4]
    assert [error.column for error in result.output.errors] == ["bad"]
    with open_store(durable_store_url) as mine:
        again = run_dataset(rows_of(3), columns, tools=[], store=mine)
        assert not mine.closed
        assert [row["twice"] for row in again.output] == [0, 2, 4]


def test_a_plan_and_an_event_sent_close_the_store_they_opened(durable_store_url, monkeypatch):
    run_dataset(rows_of(2), {"twice": lambda row: row["x"] * 2}, tools=[], store=durable_store_url)
    opened = _spy_on_opened_stores(monkeypatch)

    estimate = pl.plan(dataset_play(rows_of(2), {"y": lambda row: 1}), store=durable_store_url)
    assert pl.send_event(f"sent-{uuid.uuid4().hex}", {"a": 1}, store=durable_store_url)

    assert estimate.calls == 0
    assert [store.closed for store in opened] == [True, True]


def test_a_worker_closes_the_store_it_opened_as_its_block_ends(durable_store_url):
    with pl.Worker(store=durable_store_url) as worker:
        assert asyncio.run(worker.run(burst=True)) == []
        assert not worker.store.closed
    assert worker.store.closed
    with open_store(durable_store_url) as mine:
        with pl.Worker(store=mine) as worker:
            asyncio.run(worker.run(burst=True))
        assert not mine.closed


@pytest.mark.anyio
async def test_a_run_that_ends_first_leaves_the_store_of_a_run_on_its_url_open(
    durable_store_url,
):
    """Runs on one loop and one store URL share the gates of a rate-limited tool, which keep
    their state in the store: the run that ends first closes the store it opened, and the
    calls of the run still going go through a store that is open."""
    name = f"t.rated_{uuid.uuid4().hex[:8]}"
    rated = pl.tool(name, rate=pl.Rate(per_second=1000, burst=1000))(lambda input: input["n"])
    called, go_on = asyncio.Event(), asyncio.Event()

    @pl.play(name=f"longer-{name}")
    async def longer(ctx, input):
        first = (await ctx.tool(name, {"n": 1})).data
        called.set()
        await go_on.wait()
        return [first, (await ctx.tool(name, {"n": 2})).data]

    @pl.play(name=f"shorter-{name}")
    async def shorter(ctx, input):
        return (await ctx.tool(name, {"n": 3})).data

    running = asyncio.create_task(pl.arun(longer, tools=[rated], store=durable_store_url))
    await called.wait()
    ended = await pl.arun(shorter, tools=[rated], store=durable_store_url)
    go_on.set()
    result = await running

    assert (ended.status, ended.output) == ("completed", 3)
    assert (result.status, result.output, result.error) == ("completed", [1, 2], None)


def test_dataset_errors_carry_tool_details(registry):
    @registry.tool("t.remote")
    def remote(input):
        raise pl.ToolError("t.remote", "quota", status=402, code="payment", request_id="r-9")

    result = run_play(dataset_play(rows_of(1), {"y": call_tool("t.remote")}), tools=[registry])

    (error,) = result.output.errors
    assert (error.column, error.tool) == ("y", "t.remote")
    assert (error.status, error.code, error.request_id) == (402, "payment", "r-9")
    assert "quota" in error.message


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_tool_input_holding_nan_or_infinity_fails_its_row_and_is_never_sent(registry, number):
    """JSON has no NaN or infinity: written as null, such an input was sent and keyed as one
    holding null (a call with -inf was answered from the receipt bought for nan)."""
    sent = []
    registry.tool("t.look")(lambda input: sent.append(input) or {"ok": True})
    rows = [{"x": 1, "v": 1.5}, {"x": 2, "v": [number]}, {"x": 3, "v": None}]
    look = call_tool("t.look", lambda row: {"v": row["v"]})
    result = run_dataset(rows, {"y": look}, tools=[registry], key="x")

    (error,) = [e for e in result.output.errors if e.column == "y"]
    assert error.row_key == "2" and error.code == "invalid_input"
    assert repr(number) in error.message and "JSON" in error.message
    assert sent == [{"v": 1.5}, {"v": None}]


def test_a_tool_input_that_cannot_be_sent_fails_its_row_only(registry):
    """One row's input nests past what JSON encoders take: that cell fails, saying so; the
    other rows are called and kept."""
    sent = []
    registry.tool("t.look")(lambda input: sent.append(input) or {"ok": True})
    deep: list = []
    for _ in range(300):
        deep = [deep]
    rows = [{"x": 1, "v": "a"}, {"x": 2, "v": deep}, {"x": 3, "v": "c"}]
    look = call_tool("t.look", lambda row: {"v": row["v"]})
    result = run_dataset(rows, {"y": look}, tools=[registry], key="x")

    assert result.status == "completed_with_errors", result.error
    errors = {e.column: e for e in result.output.errors}
    assert set(errors) == {"y", "v"}  # the input field itself cannot be stored either
    error = errors["y"]
    assert error.row_key == "2" and error.code == "invalid_input" and error.tool == "t.look"
    assert "its input cannot be sent" in error.message and "255 levels" in error.message
    assert len(sent) == 2
    ((cause, count),) = result.stats.errors.items()  # the cause, with its first message
    assert count == 1 and cause.startswith("invalid_input from t.look: its input cannot be sent")


def test_a_tool_without_its_id_says_to_write_it():
    """A bare @pl.tool said "Tool id <function ...> is not valid", pl.tool() a TypeError."""
    registry = pl.ToolRegistry()
    with pytest.raises(pl.PlayDefinitionError, match=r"above def company") as caught:

        @registry.tool  # type: ignore[arg-type]
        def company(input):
            return None

    assert '@pl.tool("provider.operation", ...)' in str(caught.value)
    assert "<function" not in str(caught.value)
    for make in (registry.tool, pl.tool):
        with pytest.raises(pl.PlayDefinitionError, match=r'write @pl\.tool\("provider\.op'):
            make()
    assert len(registry) == 0
