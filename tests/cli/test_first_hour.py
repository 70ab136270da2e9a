"""Issue 17, the first hour: each row of its table that is ours, driven as a user would.

`show` after a kill and a resume, `cache clear`, a ragged CSV line, a resume from another
folder, live progress on a CSV, a cell too large to keep, and what `tools describe` says.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from playline.cli import app
from playline.sim import Simulator
from playline.store import Claim, Completion, open_store, owner_id

from clihelp import PLAYLINE, Cli, in_a_terminal, one_error_line

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def said(text: str) -> str:
    """What a command printed, as one line (the console wraps long lines)."""
    return " ".join(text.split())


KILLED_PLAY = """
import os, signal
from pathlib import Path
import playline as pl

@pl.tool("fh.score", batch=pl.Batch(max_size=50), cost=pl.Cost(1, charge="on_hit"))
def score(inputs):
    return [{"score": i["n"] * 10} if i["n"] % 4 else None for i in inputs]

def maybe_die(row):
    if row["n"] == 30 and Path(os.environ["FH_KILL"]).exists():
        Path(os.environ["FH_KILL"]).unlink()
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies mid-run, as under kill -9
    return row["n"] + 1

@pl.play
async def scored(ctx, input):
    return await (
        ctx.dataset("nums", [{"n": n} for n in range(40)], key="n")
        .with_column("score", lambda row, ctx: ctx.tool("fh.score", {"n": row["n"]}))
        .with_column("next", maybe_die)
        .run()
    )
"""


def _playline(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PLAYLINE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def test_show_after_a_kill_and_a_resume_totals_every_attempt_consistently(
    cli: Cli, tmp_path: Path
) -> None:
    play = cli.play(KILLED_PLAY)
    flag = tmp_path / "kill-now"
    flag.touch()
    env = {"FH_KILL": str(flag)}
    killed = _playline("run", play, "--run-id", "k1", "--store", cli.store, cwd=tmp_path, env=env)
    assert killed.returncode == -9, killed.stderr
    resumed = _playline("resume", "k1", "--store", cli.store, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr

    ledger = open_store(cli.store).read_ledger("k1")
    paid = sum(e.credits for e in ledger)
    result = cli("show", "k1")
    assert result.exit_code == 0, result.output
    out = said(result.stdout)
    # the header's totals are the tools table's: every attempt, from the ledger and batches
    doc = json.loads(cli("show", "k1", "--json").stdout)
    totals = doc["trace"]["totals"]
    assert totals["calls"] == len(ledger) and totals["credits"] == paid == 30
    assert (
        f"totals over all 2 attempts: {totals['calls']} live calls (sent) · "
        f"{totals['requests']} provider requests · {paid:g} credits"
    ) in out
    tools = doc["trace"]["tools"]["fh.score"]
    assert (tools["calls"], tools["credits"]) == (totals["calls"], paid)
    # per attempt: the killed one paid for every call; the resume ran every row again (none
    # had been saved) and took its calls from receipts, paying nothing
    first, second = doc["trace"]["attempt_list"]
    assert first["status"] == "interrupted" and first["calls"] == 40 and first["credits"] == 30
    assert second["status"] == "completed" and second["calls"] == 0 and second["credits"] == 0
    assert second["stats"]["rows_executed"] == 40 and second["stats"]["rows_reused"] == 0
    assert second["stats"]["tool_calls_cached"] == 40
    at = r"[\d-]+ [\d:]+"
    assert re.search(
        rf"1\. {at} interrupted: its process stopped before it recorded its rows · 40 live "
        rf"calls · \d+ requests · 30 credits 2\. {at} completed: 40 rows run, 0 reused, 0 "
        r"failed · 0 live calls, 40 from receipts · 0 requests · 0 credits",
        out,
    ), out
    assert "reused: completed in an earlier attempt" in out  # the words are explained
    assert "rows stored: 40 (40 completed)" in out


def test_runs_shows_what_a_killed_run_paid_and_stored(cli: Cli, tmp_path: Path) -> None:
    """A killed run never wrote its stats: its credits come from the ledger and its rows
    from the store, as on the web UI's runs page (not a blank)."""
    play = cli.play(KILLED_PLAY)
    flag = tmp_path / "kill-now"
    flag.touch()
    killed = _playline(
        "run",
        play,
        "--run-id",
        "k1",
        "--store",
        cli.store,
        cwd=tmp_path,
        env={"FH_KILL": str(flag)},
    )
    assert killed.returncode == -9, killed.stderr
    paid = sum(e.credits for e in open_store(cli.store).read_ledger("k1"))

    listed = _playline("runs", "--store", cli.store, cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    [line] = [x for x in listed.stdout.splitlines() if "k1" in x]
    cells = [cell.strip() for cell in line.split("│") if cell.strip()]
    assert paid == 30 and cells[2] == "interrupted" and cells[-3:] == ["0", "0", "30"], line


WATERFALL_PLAY = """
import playline as pl

@pl.tool("fh.cheap", cost=pl.Cost(1, charge="on_hit"))
def cheap(i):
    return {"v": i["n"]} if i["n"] % 2 else None

@pl.tool("fh.dear", cost=pl.Cost(2))
def dear(i):
    return {"v": i["n"]}

FIND = pl.Waterfall("find", output="v", steps=[pl.ToolStep("dear", "fh.dear"),
                                               pl.ToolStep("cheap", "fh.cheap")])

@pl.play
async def found(ctx, input):
    return await (
        ctx.dataset("nums", [{"n": n} for n in range(input.get("rows", 10))], key="n")
        .with_column("v", lambda row, ctx: ctx.waterfall(FIND, {"n": row["n"]}))
        .run()
    )
"""


def test_show_has_a_waterfall_table_per_step(cli: Cli) -> None:
    play = cli.play(WATERFALL_PLAY)
    assert cli("run", play, "--run-id", "w1").exit_code == 0
    out = said(cli("show", "w1").stdout)
    assert "Waterfall find: 10 rows, 10 found (100%), 20 credits, 2.00 credits per hit" in out
    assert "│ dear │ 10 │ 10 │ 100% │ 20 │ 2.00 │ 100% │" in out
    assert "1 waterfall event(s)" not in out
    assert "not enough history to order by cost" in out
    doc = json.loads(cli("show", "w1", "--json").stdout)
    (waterfall,) = doc["waterfalls"]
    assert waterfall["coverage"] == 1.0 and waterfall["credits_per_hit"] == 2.0
    steps = {s["id"]: s for s in waterfall["steps"]}
    assert steps["dear"]["hits"] == 10 and steps["dear"]["credits_per_hit"] == 2.0
    assert steps["cheap"]["attempts"] == 0 and steps["cheap"]["skipped"] == 10


def test_show_rows_prints_the_first_rows_as_a_table(cli: Cli, local_play: str) -> None:
    assert cli("run", local_play, "--run-id", "r1").exit_code == 0
    result = cli("show", "r1", "--rows", "2")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Dataset 'names': the first 2 of 3 rows" in out
    assert "ada" in out and "alan" in out and "nobody" not in out
    assert "name=ADA" in out  # a nested value on one line
    picked = cli("show", "r1", "--rows", "5", "--dataset", "names", "--columns", "name,size")
    assert "nobody" in picked.stdout and "ADA" not in picked.stdout
    docs = cli.json_lines(cli("show", "r1", "--rows", "1", "--columns", "size", "--json").stdout)
    assert docs == [{"_key": "ada", "_status": "completed", "size": 3}]
    line = one_error_line(cli("show", "r1", "--rows", "1", "--columns", "sise"), 2)
    assert "no column 'sise'" in line and "Did you mean 'size'?" in line
    line = one_error_line(cli("show", "r1", "--rows", "1", "--dataset", "nams"), 1)
    assert "no dataset 'nams'" in line and "Did you mean 'names'?" in line
    assert "add --rows N" in one_error_line(cli("show", "r1", "--columns", "size"), 2)


def test_cache_clear_asks_with_the_cost_of_buying_again(cli: Cli, local_play: str) -> None:
    assert cli("run", local_play, "--run-id", "r1").exit_code == 0
    store = open_store(cli.store)
    declined = cli.runner.invoke(app, ["cache", "clear", "--store", cli.store], input="n\n")
    assert declined.exit_code == 1
    asked = said(declined.stdout)
    assert "Delete 3 receipt(s) of 1 tool(s)?" in asked
    assert "about 2 credits to buy them back" in asked  # 3 receipts x 2/3 credit a call
    assert "Nothing deleted." in asked
    assert store.receipt_stats()["clitest.upper"]["completed"] == 3
    accepted = cli.runner.invoke(app, ["cache", "clear", "--store", cli.store], input="y\n")
    assert accepted.exit_code == 0 and "Deleted 3 receipt(s)" in accepted.stdout
    assert store.receipt_stats() == {}


def test_cache_clear_names_a_tool_whose_price_the_ledger_does_not_know(
    cli: Cli, local_play: str
) -> None:
    """Not 'about 0 credits' for receipts no purchase in the ledger prices."""
    assert cli("run", local_play, "--run-id", "r1").exit_code == 0
    owner, now = owner_id("test"), time.time()
    with open_store(cli.store) as db:  # a result with no ledger entry (bought elsewhere)
        db.claim_receipts(
            [Claim(key="k1", tool="acme.find", run_id="r1")],
            owner=owner,
            lease_until=now + 60,
            now=now,
        )
        db.complete_receipts([Completion(key="k1", result=b"{}")], owner=owner, now=now)

    cleared = cli("cache", "clear", "--yes")

    assert cleared.exit_code == 0, cleared.output
    out = said(cleared.stdout)
    assert "Deleted 4 receipt(s)" in out, out
    assert "about 2 credits to buy them back, and an unknown cost for acme.find" in out, out


def test_cache_clear_with_no_terminal_to_ask_on_says_to_pass_yes(cli: Cli, local_play: str) -> None:
    assert cli("run", local_play, "--run-id", "r1").exit_code == 0

    unasked = cli.runner.invoke(app, ["cache", "clear", "--store", cli.store], input="")

    line = one_error_line(unasked, 2)
    assert "got no answer" in line and "pass --yes" in line
    assert open_store(cli.store).receipt_stats()["clitest.upper"]["completed"] == 3


def test_cache_clear_of_an_unknown_tool_is_an_error_with_a_suggestion(
    cli: Cli, local_play: str
) -> None:
    assert cli("run", local_play).exit_code == 0
    line = one_error_line(cli("cache", "clear", "--tool", "clitest.uper", "--yes"), 2)
    assert "no receipts of that tool" in line and "Did you mean clitest.upper?" in line
    assert open_store(cli.store).receipt_stats()["clitest.upper"]["completed"] == 3


def test_cache_clear_on_a_mistyped_store_creates_nothing(cli: Cli, tmp_path: Path) -> None:
    typo = tmp_path / "typo.db"

    cleared = cli("cache", "clear", "--yes", "--store", f"sqlite:///{typo}", store=False)

    line = one_error_line(cleared, 1)
    assert "No store at" in line and not typo.exists()


CSV_PLAY = """
import playline as pl

@pl.play
async def read(ctx, input):
    rows = ctx.csv(input["file"], on_bad_line=input.get("bad", "error"))
    return await ctx.dataset("people", rows, key="email").with_column(
        "domain", lambda row: row["email"].split("@")[1]).run()
"""


def test_a_ragged_csv_line_is_skipped_and_logged_or_fails_without_a_resume_hint(
    cli: Cli, tmp_path: Path
) -> None:
    lines = ["email,name"] + [f"p{i}@x{i}.io,P{i}" for i in range(2000)]
    lines[1234] = "ragged@x.io,Rag,ged,extra"
    (tmp_path / "people.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    play = cli.play(CSV_PLAY)
    failed = cli("run", play, "-i", f"file={tmp_path / 'people.csv'}", "--run-id", "c1")
    assert failed.exit_code == 1
    out = said(failed.stdout)
    assert "line 1235: 4 fields but the header names 2 columns" in out
    assert 'on_bad_line="skip"' in out
    assert "playline resume" not in out  # resuming cannot help
    assert "fix: change the play or its input as the error says" in out

    skipped = cli("run", play, "-i", f"file={tmp_path / 'people.csv'}", "-i", "bad=skip",
                  "--run-id", "c2")  # fmt: skip
    assert skipped.exit_code == 0, skipped.output
    assert "1999 rows: 1999 run" in said(skipped.stdout)
    log = said(cli("logs", "c2").stdout)
    assert "skipped line 1235 (4 fields, the header names 2)" in log
    assert "skipped 1 line(s) with more fields than the header: 1235." in log


def test_resume_from_another_folder_reads_the_input_where_the_run_started(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = tmp_path / "project"
    (start / "data").mkdir(parents=True)
    (start / "data" / "companies.csv").write_text("email,name\nada@acme.io,Ada\n", "utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    play = cli.play(CSV_PLAY)
    monkeypatch.chdir(start)
    assert cli("run", play, "-i", "file=data/companies.csv", "--run-id", "e1").exit_code == 0
    monkeypatch.chdir(elsewhere)
    resumed = cli("resume", "e1", "--json")
    assert resumed.exit_code == 0, resumed.output
    end = cli.json_lines(resumed.stdout)[-1]
    assert end["status"] == "completed" and end["stats"]["rows_reused"] == 1
    # a new run started here reads from here, and says where it looked
    here = cli("run", play, "-i", "file=data/companies.csv", "--json")
    assert here.exit_code == 1
    error = cli.json_lines(here.stdout)[-1]["error"]
    assert "not found" in error and str(elsewhere / "data" / "companies.csv") in error
    assert f"a relative path starts in the folder the run started in ({elsewhere})" in error


PROGRESS_PLAY = """
import playline as pl

@pl.tool("fh.slow", batch=pl.Batch(max_size=5), rate=pl.Rate(per_second=20, burst=1))
def slow(inputs):
    return [{"ok": True} for i in inputs]

@pl.play
async def progress(ctx, input):
    rows = ctx.csv(input["file"])
    return await ctx.dataset("people", rows, key="email").with_column(
        "ok", lambda row, ctx: ctx.tool("fh.slow", {"email": row["email"]})).with_column(
        "fails", lambda row: 1 / 0 if row["email"].startswith("p7@") else 1).run()
"""


def test_live_progress_on_a_csv_shows_a_total_rate_eta_and_failed(cli: Cli, tmp_path: Path) -> None:
    rows = "email\n" + "".join(f"p{i}@x.io\n" for i in range(60))
    (tmp_path / "people.csv").write_text(rows, encoding="utf-8")
    play = cli.play(PROGRESS_PLAY)
    out = in_a_terminal(
        ["run", play, "-i", f"file={tmp_path / 'people.csv'}", "--store", cli.store],
        tmp_path,
        columns=160,
    )
    frames = [ANSI.sub("", f) for f in out.split("\x1b[2K") if "people" in f and "rows" in f]
    assert frames, out
    assert any("/60 rows" in f and "ETA" in f and "rows/s" in f for f in frames)
    last = frames[-1]
    assert "60/60 rows" in last and "1 failed" in last and "rows/s" in last
    assert "ETA" not in last  # finished: how long it took instead
    tail = ANSI.sub("", out[out.rfind("people") :])
    assert "waiting" not in tail and "in flight" not in tail
    assert "cached" not in tail  # one vocabulary: reused rows, calls from receipts
    assert "60 rows: 60 run, 0 reused, 1 failed" in tail
    assert "from receipts (free)" in tail


CELL_PLAY = """
import playline as pl

@pl.play
async def big(ctx, input):
    return await ctx.dataset("docs", [{"n": n} for n in range(3)], key="n").with_column(
        "body", lambda row: "x" * 6_000_000 if row["n"] == 1 else "small").run()
"""


def test_a_cell_over_the_size_limit_fails_that_cell_not_the_run(cli: Cli, tmp_path: Path) -> None:
    play = cli.play(CELL_PLAY)
    result = cli("run", play, "--run-id", "big")
    assert result.exit_code == 0, result.output
    assert "completed_with_errors" in result.stdout and "1 failed" in said(result.stdout)
    rows = {r.key: r for r in open_store(cli.store).iter_rows("big", "docs")}
    assert rows["0"].values["body"] == "small" and rows["2"].status == "completed"
    cell = rows["1"].cells["body"]
    assert cell["status"] == "failed" and rows["1"].values["body"] is None
    assert "Column 'body': the value is 6.0 MB, over the cell limit of 5 MB" in cell["error"]
    assert "cell_limit" in cell["error"]
    assert (tmp_path / "cli.db").stat().st_size < 2_000_000  # neither the row nor an event


def test_tools_describe_says_what_a_tool_takes_and_how_it_charges(
    cli: Cli, sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYLINE_GATEWAY_TOKEN", sim.token)
    doc = json.loads(cli("tools", "describe", "sim.email.beta", "--gateway", sim.url,
                         store=False).stdout)  # fmt: skip
    assert doc["input"]["required"] == ["first_name", "last_name", "domain"]
    assert doc["cost_basis"] == (
        "1 credit per input found (on_hit; a miss is free); a batch request of up to 50 "
        "inputs is charged per input, not per request"
    )
    assert doc["coverage"] == 0.45
    gamma = json.loads(cli("tools", "describe", "sim.email.gamma", "--gateway", sim.url,
                           store=False).stdout)  # fmt: skip
    assert gamma["cost_basis"] == "2 credits per input, found or not (per_call)"
    line = one_error_line(cli("tools", "describe", "sim.email.bta", "--gateway", sim.url,
                              store=False), 1)  # fmt: skip
    assert "Did you mean sim.email.beta?" in line


def test_tools_describe_gives_a_local_tools_signature(cli: Cli, local_play: str) -> None:
    doc = json.loads(cli("tools", "describe", "clitest.upper", "--play", local_play,
                         store=False).stdout)  # fmt: skip
    assert doc["input"]["signature"] == "upper(inputs)"
    assert doc["input"]["takes"] == "a list of up to 10 input dicts, returns an aligned list"


KEYED_PLAY = """
import playline as pl

@pl.tool("clitest.keyed", secrets=["CLITEST_KEY", "CLITEST_OTHER"])
def keyed(input):
    return {"ok": pl.secret("CLITEST_KEY").reveal() != ""}

FINDER = pl.HttpTool(
    "clitest.finder", "POST", "https://api.example.com/find", auth=pl.Auth.bearer("CLITEST_HTTP")
)

@pl.play(name="keyed")
async def keyed_play(ctx, input):
    return None
"""


def test_tools_describe_names_the_keys_a_tool_reads_and_whether_they_are_set(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool's declared secrets and an HTTP tool's key: their names and whether this
    environment sets them (either spelling), never a value."""
    play = cli.play(KEYED_PLAY)
    monkeypatch.setenv("PLAYLINE_SECRET_CLITEST_KEY", "s3cr3t-value")
    monkeypatch.delenv("CLITEST_OTHER", raising=False)
    monkeypatch.setenv("CLITEST_HTTP", "another-value")

    local = cli("tools", "describe", "clitest.keyed", "--play", play, store=False).stdout
    http = cli("tools", "describe", "clitest.finder", "--play", play, store=False).stdout

    assert json.loads(local)["secrets"] == [
        {"name": "CLITEST_KEY", "set": True},
        {"name": "CLITEST_OTHER", "set": False},
    ]
    assert json.loads(http)["secrets"] == [{"name": "CLITEST_HTTP", "set": True}]
    assert "s3cr3t-value" not in local and "another-value" not in http


def test_the_readme_and_docs_do_not_send_users_outside_the_repository() -> None:
    root = Path(__file__).resolve().parents[2]
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        assert "shared/design" not in page.read_text(encoding="utf-8"), page


# --- run ids, signals, a wrong gateway path, a value that cannot be stored ---------------


def test_runs_never_cuts_a_run_id_in_a_narrow_piped_terminal(cli: Cli, local_play: str) -> None:
    for _ in range(2):
        assert cli("run", local_play).exit_code == 0
    ids = [run.run_id for run in open_store(cli.store).list_runs()]

    listed = _playline("runs", "--store", cli.store, cwd=cli.tmp, env={"COLUMNS": "80"})

    assert listed.returncode == 0, listed.stderr
    assert len(ids) == 2 and all(run_id in listed.stdout for run_id in ids), listed.stdout
    # piped, every column is whole: a line per run, greppable
    lines = [line for line in listed.stdout.splitlines() if any(i in line for i in ids)]
    assert len(lines) == 2 and all("shout" in x and "completed" in x for x in lines), lines


def _stopped_mid_call(cli: Cli, signum: int, *args: str) -> tuple[int, str, str]:
    """`playline run *args`, sent ``signum`` while its play's held tool call is in flight (the
    play touches "called", then waits for "release"); its exit code, stdout and stderr."""
    proc = subprocess.Popen(
        [PLAYLINE, "run", *args, "--store", cli.store],
        cwd=cli.tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 60  # only bounds a broken test
    while not (cli.tmp / "called").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the held tool was never called"
        time.sleep(0.01)
    proc.send_signal(signum)
    (cli.tmp / "release").touch()
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


STOPPABLE_PLAY = """
import asyncio
from pathlib import Path
import playline as pl

HERE = Path(__file__).parent

@pl.tool("fh.held", cost=pl.Cost(1))
async def held(input):
    with open(HERE / "calls.log", "a") as log:
        log.write(f"{input['n']}\\n")
    (HERE / "called").touch()
    while not (HERE / "release").exists():  # the test signals the command meanwhile
        await asyncio.sleep(0.01)
    return {"v": input["n"]}

@pl.play
async def stoppable(ctx, input):
    return await (
        ctx.dataset("rows", [{"n": 1}], key="n")
        .with_column("a", lambda row, ctx: ctx.tool("fh.held", {"n": row["n"]}))
        .with_column("b", lambda row, ctx: ctx.tool("fh.held", {"n": row["n"] + 100}))
        .run()
    )
"""


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_lets_the_call_in_flight_finish_exits_3_and_names_the_real_run(
    cli: Cli, signum: str
) -> None:
    code, out, err = _stopped_mid_call(cli, getattr(signal, signum), cli.play(STOPPABLE_PLAY))

    [run] = open_store(cli.store).list_runs()
    assert code == 3, out + err
    assert out.startswith(f"run {run.run_id}")  # the id comes first, before any progress
    assert f"playline resume {run.run_id}" in said(out) and "RUN_ID" not in out + err
    assert "1 pending (a resume runs them)" in said(out)  # the row is not lost, nor done
    resumed = _playline("resume", run.run_id, "--store", cli.store, cwd=cli.tmp)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # the call in flight at the signal was recorded, not made again; the next one was not sent
    assert (cli.tmp / "calls.log").read_text().split() == ["1", "101"]


PARTLY_DONE_PLAY = """
import asyncio
from pathlib import Path
import playline as pl

HERE = Path(__file__).parent

@pl.tool("fh.quick")
def quick(input):
    (HERE / f"quick-{input['n']}").touch()
    return {"v": input["n"]}

@pl.tool("fh.slow")
async def slow(input):
    while not (HERE / "quick-11").exists():  # row 1 has sent its last call: it finishes
        await asyncio.sleep(0.01)
    (HERE / "called").touch()
    while not (HERE / "release").exists():  # the test signals the command meanwhile
        await asyncio.sleep(0.01)
    return {"v": input["n"]}

@pl.play
async def partly(ctx, input):
    first = lambda row, ctx: ctx.tool("fh.slow" if row["n"] == 2 else "fh.quick", row)
    return await (
        ctx.dataset("rows", [{"n": 1}, {"n": 2}], key="n")
        .with_column("a", first)
        .with_column("b", lambda row, ctx: ctx.tool("fh.quick", {"n": row["n"] + 10}))
        .run()
    )
"""


def test_out_on_a_stopped_run_says_the_file_lacks_the_pending_rows(cli: Cli) -> None:
    out = cli.tmp / "rows.csv"

    code, stdout, stderr = _stopped_mid_call(
        cli, signal.SIGTERM, cli.play(PARTLY_DONE_PLAY), "--out", str(out)
    )

    assert code == 3, stdout + stderr
    assert "Wrote 1 row " in stdout and "partial: 1 row pending" in said(stdout)
    assert len(out.read_text().splitlines()) == 2  # the header and the finished row


def test_a_gateway_path_that_answers_404_points_at_the_url(
    cli: Cli, local_play: str, sim: Simulator
) -> None:
    ran = cli("run", local_play, "--gateway", f"{sim.url}/wrongpath")

    line = one_error_line(ran, 1)
    assert "404" in line and "Check the URL" in line and "token" not in line


UNSTORABLE_PLAY = """
import playline as pl

@pl.play
async def odd(ctx, input):
    return await (
        ctx.dataset("rows", [{"n": n} for n in range(3)], key="n")
        .with_column("tag", lambda row: {1, 2} if row["n"] == 1 else f"t{row['n']}")
        .with_column("after", lambda row: row["n"] * 2)
        .run()
    )
"""


def test_a_value_that_cannot_be_stored_fails_its_cell_naming_the_column(cli: Cli) -> None:
    ran = cli("run", cli.play(UNSTORABLE_PLAY), "--json")

    assert ran.exit_code == 0, ran.output  # partial failure: completed_with_errors
    assert cli.json_lines(ran.stdout)[-1]["status"] == "completed_with_errors"
    [run] = open_store(cli.store).list_runs()
    rows = {r.key: r for r in open_store(cli.store).iter_rows(run.run_id, "rows")}
    assert [rows[k].status for k in ("0", "1", "2")] == ["completed", "failed", "completed"]
    cell = rows["1"].cells["tag"]
    assert cell["status"] == "failed" and "Column 'tag' returned a set" in cell["error"]
    assert rows["2"].values == {"n": 2, "tag": "t2", "after": 4}


HELD_AT_LOAD_PLAY = """
import os, signal
from pathlib import Path
import playline as pl

if os.environ.get("FH_LOADING"):  # the test presses Ctrl-C while this file loads
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal
    Path(os.environ["FH_LOADING"]).touch()
    signal.pause()

@pl.play
async def waits(ctx, input):
    return await ctx.wait_for_event("fh-go")
"""


def _interrupted_while_loading(cli: Cli, *args: str) -> tuple[int, str]:
    """`playline *args`, sent SIGINT while it imports HELD_AT_LOAD_PLAY (before the run's own
    signal handling starts); its exit code and stderr."""
    loading = cli.tmp / "loading"
    loading.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [PLAYLINE, *args, "--store", cli.store],
        cwd=cli.tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200", "FH_LOADING": str(loading)},
    )
    deadline = time.monotonic() + 60  # only bounds a broken test
    while not loading.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the play file never loaded"
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def test_a_ctrl_c_outside_the_runs_signal_handling_names_the_real_run_or_none(cli: Cli) -> None:
    play = cli.play(HELD_AT_LOAD_PLAY)
    assert cli("run", play, "--run-id", "w1").exit_code == 3  # suspended: waits for its event

    code, err = _interrupted_while_loading(cli, "resume", "w1")

    assert code == 130, err
    assert err.strip() == "error: interrupted; resume the run with `playline resume w1`"
    # a new run interrupted before it started: there is no run to resume
    code, err = _interrupted_while_loading(cli, "run", play)
    assert code == 130, err
    assert err.strip() == "error: interrupted"
    assert [r.run_id for r in open_store(cli.store).list_runs()] == ["w1"]


def test_a_ctrl_c_while_the_result_prints_names_the_run_only_if_it_is_left_to_resume(
    cli: Cli, local_play: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playline.cli import _runcmds

    def pressed(*args: object) -> None:
        raise KeyboardInterrupt  # a Ctrl-C after the run's signal handlers were taken down

    monkeypatch.setattr(_runcmds, "_print_result", pressed)
    suspended = cli("run", cli.play(HELD_AT_LOAD_PLAY, "waits.py"))
    [run] = open_store(cli.store).list_runs()
    assert suspended.exit_code == 130
    assert suspended.stderr.strip() == (
        f"error: interrupted; resume the run with `playline resume {run.run_id}`"
    )
    completed = cli("run", local_play)  # nothing is left to resume
    assert completed.exit_code == 130 and completed.stderr.strip() == "error: interrupted"
