"""`playline worker` resumes suspended runs when they are due; `event send` makes them due."""

from __future__ import annotations

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
    from playline.store import open_store
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
