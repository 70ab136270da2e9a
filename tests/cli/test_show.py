"""`playline show` of a run whose process was killed with no later attempt, and of a run whose
child plays paid: what it says matches what the store holds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from playline._trace import run_detail
from playline.store import open_store

from clihelp import LOCAL_PLAY, Cli

PLAYLINE = str(Path(sys.executable).with_name("playline"))


def said(text: str) -> str:
    """What a command printed, as one line (the console wraps long lines)."""
    return " ".join(text.split())


# One paid call, held while the file "hold" exists: the test kills the process meanwhile.
HELD_PLAY = """
import asyncio
from pathlib import Path
import playline as pl

HERE = Path(__file__).parent

@pl.tool("sh.held", cost=pl.Cost(2))
async def held(input):
    (HERE / "called").touch()
    while (HERE / "hold").exists():
        await asyncio.sleep(0.01)
    return {"v": input["n"]}

@pl.play
async def holding(ctx, input):
    return await (
        ctx.dataset("d", [{"n": 1}], key="n")
        .with_column("v", lambda row, ctx: ctx.tool("sh.held", {"n": row["n"]}))
        .run()
    )
"""


def _killed_mid_call(cli: Cli, run_id: str) -> None:
    """`playline run` of HELD_PLAY, SIGKILLed while its call is out and after its dataset's
    start is in the store (so `show` knows the dataset the kill left running)."""
    proc = _held_mid_call(cli, run_id)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    (cli.tmp / "hold").unlink()


def _held_mid_call(cli: Cli, run_id: str) -> subprocess.Popen[str]:
    """`playline run` of HELD_PLAY, its call out and its dataset's start in the store: held
    there until the file "hold" goes."""
    play = cli.play(HELD_PLAY)
    (cli.tmp / "hold").touch()
    proc = subprocess.Popen(
        [PLAYLINE, "run", play, "--run-id", run_id, "--store", cli.store],
        cwd=cli.tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    store = open_store(cli.store)

    def ready() -> bool:
        if not (cli.tmp / "called").exists():
            return False
        return any(e.dataset == "d" for e in store.read_events(run_id, kinds=["dataset"]))

    deadline = time.monotonic() + 60  # only bounds a broken test
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the held call or its dataset never showed up"
        time.sleep(0.01)
    return proc


def _run_page(cli: Cli, run_id: str) -> dict[str, Any]:
    """What the web UI's run page shows of the run (``/api/run/ID``)."""
    store = open_store(cli.store)
    record = store.get_run(run_id)
    assert record is not None
    return run_detail(store, record)


def _show(cli: Cli, run_id: str) -> tuple[str, dict[str, Any]]:
    shown = cli("show", run_id)
    assert shown.exit_code == 0, shown.output
    doc = cli("show", run_id, "--json")
    assert doc.exit_code == 0, doc.output
    return said(shown.stdout), json.loads(doc.stdout)


def test_show_after_a_kill_with_no_later_attempt_says_its_dataset_was_interrupted(
    cli: Cli,
) -> None:
    _killed_mid_call(cli, "k1")

    out, doc = _show(cli, "k1")

    assert doc["status"] == "interrupted"
    assert [(d["name"], d["status"]) for d in doc["trace"]["datasets"]] == [("d", "interrupted")]
    assert "│ d │ interrupted │" in out, out
    # the web UI's run page reads the same trace
    store = open_store(cli.store)
    record = store.get_run("k1")
    assert record is not None
    assert [d["status"] for d in run_detail(store, record)["datasets"]] == ["interrupted"]


def test_show_of_a_running_run_says_its_attempt_goes_on(cli: Cli) -> None:
    """Its last attempt has no end on record because it has not ended: not 'interrupted:
    its process stopped' while the header says it runs."""
    proc = _held_mid_call(cli, "r1")
    try:
        out, doc = _show(cli, "r1")
        page = _run_page(cli, "r1")
    finally:
        (cli.tmp / "hold").unlink()
        proc.communicate(timeout=60)
    assert doc["status"] == "running" and proc.returncode == 0
    assert [a["status"] for a in doc["trace"]["attempt_list"]] == ["running"]
    assert "1. " in out and "running: going on" in out, out
    assert "stopped before it recorded" not in out, out
    assert [a["status"] for a in page["trace"]["attempt_list"]] == ["running"]


def test_show_after_a_kill_counts_the_calls_in_doubt_and_how_to_settle_them(cli: Cli) -> None:
    _killed_mid_call(cli, "k2")

    out, doc = _show(cli, "k2")

    # the call was out when the process died: it may have been charged, with no record of it
    assert doc["in_doubt"] == {"calls": 1, "tools": {"sh.held": 1}, "passed": {}}
    assert _run_page(cli, "k2")["in_doubt"] == doc["in_doubt"]  # the web UI's run page too
    assert (
        "1 call(s) in doubt (may have been charged): 1 of sh.held. `playline resume k2` "
        "re-sends those whose provider recognises idempotency keys (no second charge); "
        "`playline resume k2 --retry-in-doubt` buys the others again"
    ) in out, out
    # as it says: a local paid tool has no idempotency keys, so a resume does not send it again
    assert cli("resume", "k2").exit_code in (0, 1)
    assert open_store(cli.store).receipt_stats()["sh.held"].get("completed", 0) == 0
    assert "1 call(s) in doubt" in _show(cli, "k2")[0]
    # and --retry-in-doubt buys it again: nothing is in doubt any more
    retried = cli("resume", "k2", "--retry-in-doubt")
    assert retried.exit_code == 0, retried.output
    out, doc = _show(cli, "k2")
    assert doc["in_doubt"] == {"calls": 0, "tools": {}, "passed": {}} and "in doubt" not in out, out
    assert _run_page(cli, "k2")["in_doubt"] == doc["in_doubt"]
    assert doc["status"] == "completed" and doc["trace"]["totals"]["credits"] == 2


def test_cache_clear_keeps_the_calls_in_doubt_for_a_resume_to_settle(cli: Cli) -> None:
    """Cleared, an in-doubt call would go out again under a new idempotency key on the next
    plain resume: possibly charged twice, with no --retry-in-doubt asked for."""
    _killed_mid_call(cli, "k3")
    assert cli("resume", "k3").exit_code == 1  # a local paid tool: in doubt, not sent again
    (cli.tmp / "called").unlink()
    assert cli("run", cli.play(LOCAL_PLAY, "local.py")).exit_code == 0  # 3 receipts to clear

    cleared = cli("cache", "clear", "--yes")

    assert cleared.exit_code == 0, cleared.output
    out = said(cleared.stdout)
    assert "Deleted 3 receipt(s)" in out and "1 receipt(s) in doubt kept" in out, out
    assert "`playline resume RUN_ID --retry-in-doubt` buys the others again" in out, out
    assert open_store(cli.store).receipt_stats()["sh.held"]["unknown"] == 1
    stats = cli("cache", "stats", "--tsv").stdout.splitlines()
    assert stats[0].split("\t") == [
        "tool", "completed", "failed", "in doubt", "lost", "running", "bytes"
    ]  # fmt: skip
    assert "sh.held\t0\t0\t1\t0\t0\t0" in stats, stats
    assert cli("resume", "k3").exit_code == 1
    assert not (cli.tmp / "called").exists()  # the call in doubt was not sent again
    # settled, it is a receipt like any other: cleared, at its price
    assert cli("resume", "k3", "--retry-in-doubt").exit_code == 0
    cleared = cli("cache", "clear", "--yes")
    assert cleared.exit_code == 0, cleared.output
    out = said(cleared.stdout)
    assert "Deleted 1 receipt(s)" in out and "about 2 credits" in out and "kept" not in out


PARENT_PLAY = """
import playline as pl

@pl.tool("sh.paid", cost=pl.Cost(1))
def paid(input):
    return {"v": input["i"]}

@pl.play(name="kid")
async def kid(ctx, input):
    ds = await (
        ctx.dataset("d", [{"i": i} for i in range(input["n"])], key="i")
        .with_column("v", lambda row, ctx: ctx.tool("sh.paid", {"i": row["i"]}))
        .run()
    )
    return len(ds.to_list())

@pl.play(name="parent")
async def parent(ctx, input):
    return await ctx.run_play("kid", "kid", {"n": 10})
"""


def test_show_totals_a_parent_runs_credits_as_its_stats_do_with_its_child_plays(
    cli: Cli,
) -> None:
    ran = cli("run", cli.play(PARENT_PLAY) + ":parent", "--run-id", "p1", "--json")
    assert ran.exit_code == 0, ran.output
    assert cli.json_lines(ran.stdout)[-1]["stats"]["credits"] == 10  # the child's 10 calls

    out, doc = _show(cli, "p1")

    (child,) = open_store(cli.store).child_runs("p1")
    assert doc["stats"]["credits"] == doc["trace"]["totals"]["credits"] == 10
    assert doc["trace"]["totals"]["child_credits"] == 10
    assert doc["child_runs"] == [
        {"run_id": child.run_id, "play": "kid", "status": "completed", "rows": 10, "credits": 10}
    ]
    assert (
        "totals over the attempt: 0 live calls (sent) · 0 provider requests · 10 credits (10 "
        "of them paid by its child plays, listed below)"
    ) in out, out
    assert f"│ {child.run_id} │ kid │ completed │ 10 │ 10 │" in out, out
    assert _run_page(cli, "p1")["children"] == doc["child_runs"]  # the web UI's run page too
    # the child's own show: its calls and credits, none of them a child's
    _, kid = _show(cli, child.run_id)
    assert kid["trace"]["totals"] == {
        "requests": 10, "calls": 10, "credits": 10, "child_credits": 0, "usd": 0,
        "child_usd": 0,
    }  # fmt: skip


UNREAD_PLAY = """
import playline as pl

@pl.tool("unread.find", batch=pl.Batch(max_size=10), cost=pl.Cost(1))
def find(inputs):
    return [{"email": f"{i['first_name']}@acme.io"} for i in inputs]

FIND = pl.Waterfall("find", output="email", steps=[pl.ToolStep(
    "one", "unread.find",
    map_input=lambda i: {"first_name": i["first_name"]} if i.get("first_name") else None)])

@pl.play
async def unread(ctx, input):
    rows = [{"n": 1, "first_name": "ada"}, {"n": 2, "First": "alan"}, {"n": 3, "First": "bo"}]
    return await (
        ctx.dataset("people", rows, key="n")
        .with_column("email", lambda row, ctx: ctx.waterfall(FIND, dict(row)))
        .run()
    )
"""


def test_run_and_show_say_how_many_rows_had_none_of_the_fields_a_waterfall_reads(
    cli: Cli,
) -> None:
    ran = cli("run", f"{cli.play(UNREAD_PLAY)}:unread")

    assert ran.exit_code == 0, ran.output
    said = " ".join(ran.output.split())  # as wrapped to the terminal's width
    assert "2 rows had none of the fields waterfall 'find' reads" in said
    run_id = open_store(cli.store).list_runs(limit=1)[0].run_id
    shown = " ".join(cli("show", run_id).output.split())
    assert "3 rows, 1 found (33%)" in shown
    assert "2 with none of the fields it reads" in shown


PASSED_OVER_PLAY = """
import playline as pl

@pl.tool("po.first", cost=pl.Cost(1))
def first(input):
    raise pl.ToolError("po.first", "provider exploded", status=500)

@pl.tool("po.second", cost=pl.Cost(1))
def second(input):
    return {"email": f"{input['n']}@acme.io"}

FIND = pl.Waterfall("find", output="email", steps=[
    pl.ToolStep("first", "po.first"), pl.ToolStep("second", "po.second")])

@pl.play
async def passed(ctx, input):
    return await (
        ctx.dataset("people", [{"n": 1}, {"n": 2}], key="n")
        .with_column("email", lambda row, ctx: ctx.waterfall(FIND, {"n": row["n"]}))
        .run()
    )
"""


def test_show_says_which_calls_in_doubt_a_later_waterfall_step_made_up_for(cli: Cli) -> None:
    """A step's call fails in doubt (a 5xx after the work, maybe charged) and the next step
    finds the value: buying the first again would find nothing its row needs, so `show` does
    not tell the user to."""
    ran = cli("run", f"{cli.play(PASSED_OVER_PLAY)}:passed")

    assert ran.exit_code == 0, ran.output
    run_id = open_store(cli.store).list_runs(limit=1)[0].run_id
    shown = " ".join(cli("show", run_id).output.split())
    assert "2 call(s) in doubt (may have been charged): 2 of po.first" in shown
    assert "2 of them a later waterfall step made up for" in shown
    assert "--retry-in-doubt" not in shown
