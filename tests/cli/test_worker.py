"""`playline worker` resumes suspended runs when they are due; `event send` makes them due."""

from __future__ import annotations

from playline.store import open_store

from clihelp import Cli, one_error_line

WAITING_PLAY = """
import playline as pl

@pl.play
async def approval(ctx, input):
    answer = await ctx.wait_for_event(f"approve:{input['deal']}")
    return {"deal": input["deal"], "approved": answer["ok"]}
"""


def test_a_suspended_run_exits_3_and_the_worker_finishes_it_when_its_event_comes(cli: Cli):
    play = cli.play(WAITING_PLAY)

    started = cli("run", play, "-i", "deal=d1", "--run-id", "w1", "--json")
    assert started.exit_code == 3, started.output
    assert cli.json_lines(started.stdout)[-1]["waiting"]["events"] == ["approve:d1"]

    idle = cli("worker", "--burst")
    assert idle.exit_code == 0 and "Nothing is due" in idle.stdout

    assert cli("event", "send", "approve:d1", "--data", '{"ok": true}').exit_code == 0
    done = cli("worker", "--burst", "--json")
    assert done.exit_code == 0, done.output
    assert cli.json_lines(done.stdout) == [{"run_id": "w1", "status": "completed"}]
    shown = cli("show", "w1", "--json")
    assert '"completed"' in shown.stdout


def test_a_worker_with_nothing_due_names_a_run_another_process_holds_and_until_when(
    cli: Cli,
) -> None:
    """A run whose process was killed waits out its holder's lease: the worker said only
    'Nothing is due.', as if the run were lost."""
    import time

    from playline.store import open_store

    play = cli.play(WAITING_PLAY)
    assert cli("run", play, "-i", "deal=d9", "--run-id", "held1").exit_code == 3
    store = open_store(cli.store)
    now = time.time()
    store.claim_run("held1", holder="elsewhere:1:x", lease_until=now + 60, now=now)
    store.close()

    idle = cli("worker", "--burst")

    assert idle.exit_code == 0, idle.output
    said = " ".join(idle.stdout.split())
    assert "Nothing is due." in said
    assert "Run held1 is held by another process until" in said
    assert "`playline resume held1` on its machine goes on at once" in said


def test_the_worker_imports_play_files_given_to_it(cli: Cli):
    play = cli.play(WAITING_PLAY, name="approval.py")
    assert cli("run", play, "-i", "deal=d2", "--run-id", "w2").exit_code == 3
    cli("event", "send", "approve:d2", "--data", '{"ok": false}')

    done = cli("worker", play, "--burst", "--json")
    assert cli.json_lines(done.stdout) == [{"run_id": "w2", "status": "completed"}]


def test_the_worker_takes_a_play_as_run_names_it(cli: Cli):
    """`PLAY.py:function`, as `playline run` takes it (and the docs' Temporal example)."""
    play = cli.play(WAITING_PLAY, name="approval.py")
    assert cli("run", play, "-i", "deal=d3", "--run-id", "w3").exit_code == 3
    cli("event", "send", "approve:d3", "--data", '{"ok": true}')

    done = cli("worker", f"{play}:approval", "--burst", "--json")
    assert done.exit_code == 0, done.output
    assert cli.json_lines(done.stdout) == [{"run_id": "w3", "status": "completed"}]
    assert cli("worker", "playline.demo:enrich_people", "--burst").exit_code == 0


def test_a_missing_play_file_for_the_worker_is_a_usage_error(cli: Cli):
    one_error_line(cli("worker", "nowhere.py", "--burst"), 2)


def test_a_run_whose_play_file_is_gone_is_skipped_and_the_others_run(cli: Cli, tmp_path):
    from playline.triggers import queue_run

    play = cli.play(
        "import playline as pl\n\n@pl.play\nasync def approval(ctx, input):\n    return input\n"
    )
    gone = tmp_path / "gone.py"
    with open_store(cli.store) as db:
        for run_id, file in (("lost", gone), ("kept", play)):
            source = {"file": str(file), "function": "approval"}
            queue_run(db, run_id=run_id, play="approval", origin={"kind": "test"}, source=source)

    done = cli("worker", "--burst", "--json")

    assert done.exit_code == 0, done.output
    assert cli.json_lines(done.stdout) == [{"run_id": "kept", "status": "completed"}]
    assert "skipped lost" in done.stderr and "gone.py" in done.stderr
    # `playline show` says why it still waits, once however often a worker skips it
    assert cli("worker", "--burst").exit_code == 0
    shown = " ".join(cli("show", "lost").stdout.split())
    assert "the worker cannot resume this run: " in shown and "gone.py" in shown
    logs = cli("logs", "lost", "--json")
    assert [
        line["message"].startswith("the worker cannot") for line in cli.json_lines(logs.stdout)
    ] == [True]


# After its event, one paid call, held while the file "hold" exists.
HELD_AFTER_EVENT = """
import asyncio
from pathlib import Path
import playline as pl

HERE = Path(__file__).parent

@pl.tool("wk.held", cost=pl.Cost(1))
async def held(input):
    (HERE / "called").touch()
    while (HERE / "hold").exists():
        await asyncio.sleep(0.01)
    return {"ok": True}

@pl.play
async def gated(ctx, input):
    await ctx.wait_for_event("go:t1")
    return (await ctx.tool("wk.held", {"n": 1})).data
"""


def test_sigterm_stops_the_worker_cleanly_and_it_said_each_run_as_it_ended(cli: Cli) -> None:
    """`docker stop` or systemd: the attempt under way ends (not 'interrupted' for the next
    worker to wait out its lease), the worker exits 0, and its line for the run is out."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    play = cli.play(HELD_AFTER_EVENT, name="gated.py")
    assert cli("run", play, "--run-id", "t1").exit_code == 3
    assert cli("event", "send", "go:t1").exit_code == 0
    (cli.tmp / "hold").touch()
    worker = subprocess.Popen(
        [str(Path(sys.executable).with_name("playline")), "worker", play, "--json",
         "--store", cli.store],
        cwd=cli.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    deadline = time.monotonic() + 60  # only bounds a broken test
    while not (cli.tmp / "called").exists():
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, "the worker never made the run's call"
        time.sleep(0.01)
    worker.send_signal(signal.SIGTERM)
    (cli.tmp / "hold").unlink()  # the call in flight finishes, and is recorded
    out, err = worker.communicate(timeout=60)

    assert worker.returncode == 0, err
    assert "SIGTERM: stopping" in err
    (line,) = cli.json_lines(out)
    assert line["run_id"] == "t1" and line["status"] in ("completed", "suspended"), (
        line,
        cli("show", "t1").stdout,
    )
    shown = cli("show", "t1", "--json")
    assert '"status": "interrupted"' not in shown.stdout and '"running"' not in shown.stdout


def test_sigterm_stops_a_worker_waiting_for_its_next_look_at_once(cli: Cli) -> None:
    """A worker between looks (a long --interval, a store with no change feed) stopped only
    when its interval ended: `docker stop` waited it out, then killed it."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    play = cli.play(WAITING_PLAY)
    assert cli("run", play, "-i", "deal=d2", "--run-id", "w2").exit_code == 3
    assert cli("event", "send", "approve:d2", "--data", '{"ok": true}').exit_code == 0
    worker = subprocess.Popen(
        [str(Path(sys.executable).with_name("playline")), "worker", play, "--json",
         "--interval", "3600", "--store", cli.store],
        cwd=cli.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert worker.stdout is not None
    first = worker.stdout.readline()  # the run it finished: then it waits for its next look
    assert '"status": "completed"' in first, worker.communicate()
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=60)  # (an hour without the fix)

    assert worker.returncode == 0, err
    assert "SIGTERM: stopping" in err and "Traceback" not in err


def test_event_send_says_which_run_takes_the_event(cli: Cli) -> None:
    """An event goes to one run, once: the sender is told who waits for it, or that none
    does yet, or that several do and only the first to go on takes it."""
    play = cli.play(WAITING_PLAY)
    open_store(cli.store).close()  # a store no run has used yet: it takes events all the same
    early = cli("event", "send", "approve:nobody")
    assert "No run waits for it yet: the first run to wait for it takes it" in early.stdout
    for run_id in ("e1", "e2"):
        assert cli("run", play, "-i", "deal=shared", "--run-id", run_id).exit_code == 3
    assert cli("run", play, "-i", "deal=own", "--run-id", "e3").exit_code == 3

    one = cli("event", "send", "approve:own", "--data", '{"ok": true}')
    assert "Run e3 waits for it: a worker (`playline worker`) or `playline resume e3`" in one.stdout
    two = cli("event", "send", "approve:shared", "--data", '{"ok": true}')
    assert "2 runs wait for it (e1, e2): the first to go on takes it" in two.stdout
