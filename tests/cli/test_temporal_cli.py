"""`playline run --temporal` submits a run as a workflow and follows it (or `--detach`es);
`playline worker --temporal` serves it, finding the play file the run was submitted from;
`event send` and `resume` reach runs on Temporal; misuse is one line saying what to do."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from playline.store import RunStatus, open_store
from services import TemporalBinaries, TemporalServer, run_temporal_dev_server

from clihelp import Cli, one_error_line

WAITING_PLAY = """
import playline as pl

@pl.play
async def approval(ctx, input):
    return {"approved": await ctx.wait_for_event(input["key"])}
"""


@pytest.fixture
def queue() -> str:
    return f"cli-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def worker(cli: Cli, temporal_server: TemporalServer, queue: str) -> Iterator[list[str]]:
    """`playline worker --temporal` serving ``queue`` on the CLI's store (no play files: it
    finds them where the runs were submitted from); stopped with SIGTERM after the test."""
    with (cli.tmp / "worker.stderr").open("wb") as err:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("playline")), "worker", "--temporal",
             temporal_server.target, "--task-queue", queue, "--store", cli.store, "--json"],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first, (cli.tmp / "worker.stderr").read_text()
    assert json.loads(first)["status"] == "serving"
    yield ["--temporal", temporal_server.target, "--task-queue", queue]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, (cli.tmp / "worker.stderr").read_text()
    assert json.loads(out.splitlines()[-1]) == {"kind": "worker", "status": "stopped"}


def status_of(cli: Cli, run_id: str) -> RunStatus | None:
    record = open_store(cli.store).get_run(run_id)
    return None if record is None else record.status


def wait_for(cli: Cli, run_id: str, status: RunStatus) -> None:
    """Poll the store until the run has ``status`` (an observable condition)."""
    deadline = time.monotonic() + 60
    while status_of(cli, run_id) is not status:
        assert time.monotonic() < deadline, f"run {run_id} never became {status}"
        time.sleep(0.02)


def test_a_run_on_temporal_is_followed_to_its_end(
    cli: Cli, local_play: str, worker: list[str]
) -> None:
    out = cli.tmp / "out.csv"
    ran = cli("run", local_play, *worker, "--out", str(out))
    assert ran.exit_code == 0, ran.output
    assert "on Temporal at" in ran.stdout and "completed" in ran.stdout
    with out.open(newline="", encoding="utf-8") as handle:
        assert [row["name"] for row in csv.DictReader(handle)] == ["ada", "alan", "nobody"]


def test_a_resume_on_temporal_writes_the_runs_out_file_again(
    cli: Cli, local_play: str, worker: list[str], tmp_path: Path
) -> None:
    """A run on Temporal records its --out as a local run does: its budget stops it part
    way, and `playline resume` (with no --out) writes that file with every row."""
    out = tmp_path / "shouted.csv"
    ran = cli("run", local_play, *worker, "--run-id", "t-out", "--out", str(out),
              "--max-credits", "1")  # fmt: skip
    assert ran.exit_code == 1, ran.output  # the budget stopped it

    resumed = cli("resume", "t-out", "--max-credits", "100")

    assert resumed.exit_code == 0, resumed.output
    with out.open(newline="", encoding="utf-8") as handle:
        assert [row["name"] for row in csv.DictReader(handle)] == ["ada", "alan", "nobody"]
    assert f"to {out}" in " ".join(resumed.stdout.split())


def test_a_waiting_run_exits_3_and_its_event_finishes_it(
    cli: Cli, worker: list[str], queue: str
) -> None:
    play = cli.play(WAITING_PLAY, name="approval.py")
    key = f"approve-{queue}"
    waiting = cli("run", play, *worker, "-i", f"key={key}", "--json")
    assert waiting.exit_code == 3, waiting.output
    result = cli.json_lines(waiting.stdout)[-1]
    assert result["kind"] == "result" and result["waiting"]["events"] == [key]
    run_id = result["run_id"]

    # `playline resume` of a run on Temporal attaches to its workflow (it still waits).
    resumed = cli("resume", run_id, "--json")
    assert resumed.exit_code == 3, resumed.output

    sent = cli("event", "send", key, "--data", '{"by": "ada"}')
    assert sent.exit_code == 0, sent.output
    wait_for(cli, run_id, RunStatus.COMPLETED)
    assert open_store(cli.store).get_run(run_id).output == {"approved": {"by": "ada"}}  # type: ignore[union-attr]


def test_detach_submits_and_returns_at_once(cli: Cli, local_play: str, worker: list[str]) -> None:
    submitted = cli("run", local_play, *worker, "--detach", "--json")
    assert submitted.exit_code == 0, submitted.output
    (line,) = cli.json_lines(submitted.stdout)
    assert line["status"] == "submitted"
    wait_for(cli, line["run_id"], RunStatus.COMPLETED)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--detach"], "--detach goes with --temporal"),
        (["--namespace", "n"], "--namespace goes with --temporal"),
        (["--temporal", "nowhere"], "is not HOST:PORT"),
        (["--temporal", "127.0.0.1:7233", "--gateway", "http://x"], "belongs to the workers"),
        (["--temporal", "127.0.0.1:7233", "--detach", "--out", "x.csv"], "leave out --detach"),
    ],
)
def test_misused_run_flags_are_one_line_errors(
    cli: Cli, local_play: str, args: list[str], says: str
) -> None:
    assert says in one_error_line(cli("run", local_play, *args), 2)


def test_a_memory_store_cannot_serve_workers(cli: Cli, local_play: str) -> None:
    args = ["run", local_play, "--temporal", "127.0.0.1:7233", "--store", "memory://"]
    ran = cli(*args, store=False)
    assert "not a memory store" in one_error_line(ran, 2)


def test_an_unreachable_server_is_named(cli: Cli, local_play: str) -> None:
    # Port 1 on loopback refuses connections: nothing is recorded, and the error says where.
    ran = cli("run", local_play, "--temporal", "127.0.0.1:1")
    assert "Cannot reach the Temporal server at 127.0.0.1:1" in one_error_line(ran, 1)
    assert not open_store(cli.store).list_runs()


def test_a_follower_that_loses_its_server_says_the_run_goes_on(
    cli: Cli, temporal_bin: TemporalBinaries
) -> None:
    """Following is not the run: a follower whose Temporal server goes away exits 4, saying
    the run goes on and how to see its end, without the SDK's retry lines."""
    play = cli.play(WAITING_PLAY)
    exe = str(Path(sys.executable).with_name("playline"))
    with run_temporal_dev_server(temporal_bin) as server:
        follower = subprocess.Popen(
            [exe, "run", play, "--temporal", server.target, "--task-queue", "nobody",
             "--store", cli.store, "--run-id", "lost-1", "-i", "key=k"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert follower.stdout is not None
        first = follower.stdout.readline()  # submitted: following now
        assert "run lost-1 on Temporal" in first, first
        os.killpg(server.process.pid, signal.SIGKILL)
        out, err = follower.communicate(timeout=120)

    assert follower.returncode == 4, out + err
    assert "lost track of run lost-1" in err and "playline show lost-1" in err
    assert "WARN" not in err and "retried" not in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--burst", "--temporal", "127.0.0.1:7233"], "--burst is for the local worker"),
        (["--task-queue", "q"], "--task-queue goes with --temporal"),
        (["--concurrency", "3"], "--concurrency goes with --temporal"),
    ],
)
def test_misused_worker_flags_are_one_line_errors(cli: Cli, args: list[str], says: str) -> None:
    assert says in one_error_line(cli("worker", *args), 2)


def test_the_command_line_works_without_touching_temporal(cli: Cli, local_play: str) -> None:
    """No --temporal: the SDK is not even imported (it is an optional extra)."""
    code = (
        "import sys\nfrom playline.cli import app\n"
        "try:\n    app(sys.argv[1:])\nexcept SystemExit as exit:\n"
        "    print(exit.code, 'temporalio' in sys.modules)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code, "run", local_play, "--store", cli.store],
        capture_output=True,
        text=True,
        env={**os.environ, "PLAYLINE_STORE": cli.store},
        timeout=60,
    )
    assert ran.stdout.strip().splitlines()[-1] == "0 False", ran.stderr
