"""`playline schedule add|list|pause|resume|delete`, and `playline worker` firing a schedule:
its run gets the input given to `add` and reads relative paths from where `add` ran."""

from __future__ import annotations

import json
import time
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from playline.store import open_store
from services import TemporalServer

from clihelp import Cli, one_error_line

LEADS_PLAY = """
import playline as pl

@pl.play(name="cli-scheduled-leads")
async def leads(ctx, input):
    return {"rows": len(ctx.csv(input["file"]).to_list()), "tag": input["tag"]}
"""


@pytest.fixture
def play(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The play file, and a folder with its CSV as the current directory (where `add` runs)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "leads.csv").write_text("email\na@x.com\nb@y.com\n", encoding="utf-8")
    monkeypatch.chdir(data)
    return cli.play(LEADS_PLAY, name="leads.py")


def listed(cli: Cli) -> list[dict[str, object]]:
    result = cli("schedule", "list", "--json")
    assert result.exit_code == 0, result.output
    found: list[dict[str, object]] = json.loads(result.stdout)
    return found


def test_add_list_pause_resume_delete(cli: Cli, play: str, tmp_path: Path) -> None:
    added = cli(
        "schedule", "add", "weekly", play, "--cron", "0 9 * * MON", "--timezone", "Europe/Paris",
        "-i", "file=leads.csv", "-i", "limit:=10", "--catch-up", "all",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert "Schedule 'weekly': cli-scheduled-leads at '0 9 * * MON' (Europe/Paris)" in added.stdout
    [weekly] = listed(cli)
    assert {k: weekly[k] for k in ("name", "play", "cron", "timezone", "catch_up", "paused")} == {
        "name": "weekly",
        "play": "cli-scheduled-leads",
        "cron": "0 9 * * MON",
        "timezone": "Europe/Paris",
        "catch_up": "all",
        "paused": False,
    }
    assert weekly["input"] == {"file": "leads.csv", "limit": 10}
    assert weekly["source"] == {"file": str(Path(play).resolve()), "function": "leads"}
    assert weekly["cwd"] == str(tmp_path / "data")
    assert str(weekly["next_fire_local"]).endswith("09:00 CET") or str(
        weekly["next_fire_local"]
    ).endswith("09:00 CEST")
    assert weekly["last_run_id"] is None

    table = cli("schedule", "list")
    assert table.exit_code == 0 and "weekly" in table.stdout and "Europe/Paris" in table.stdout

    assert cli("schedule", "pause", "weekly").exit_code == 0
    assert listed(cli)[0]["paused"] is True
    resumed = cli("schedule", "resume", "weekly")
    assert resumed.exit_code == 0 and "not caught up" in resumed.stdout
    assert listed(cli)[0]["paused"] is False

    deleted = cli("schedule", "delete", "weekly")
    assert deleted.exit_code == 0 and "the runs it queued stay" in deleted.stdout
    assert listed(cli) == []
    assert "No schedule named 'weekly'" in one_error_line(cli("schedule", "delete", "weekly"), 2)
    assert "No schedule named 'weekly'" in one_error_line(cli("schedule", "pause", "weekly"), 2)


def test_a_name_taken_needs_replace(cli: Cli, play: str) -> None:
    assert cli("schedule", "add", "daily", play, "--cron", "0 6 * * *").exit_code == 0
    taken = one_error_line(cli("schedule", "add", "daily", play, "--cron", "0 7 * * *"), 2)
    assert "Schedule 'daily' exists" in taken and "--replace" in taken
    replaced = cli("schedule", "add", "daily", play, "--cron", "0 7 * * *", "--replace")
    assert replaced.exit_code == 0, replaced.output
    assert listed(cli)[0]["cron"] == "0 7 * * *"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "0 9 * *"], "has 4 fields; give five"),
        (["--cron", "every monday"], "has 2 fields"),
        (["--cron", "0 25 * * *"], "is not a cron expression"),
        (["--cron", "0 9 * * MON", "--timezone", "Europe/Pariss"], "not a known timezone"),
        (["--cron", "0 9 * * MON", "--catch-up", "some"], "--catch-up 'some': give one of"),
        (["--cron", "0 9 * * MON", "--namespace", "x"], "--namespace go with --temporal"),
        (["--cron", "0 9 * * MON", "-i", "novalue"], "is not key=value"),
    ],
)
def test_a_bad_schedule_is_a_usage_error(
    cli: Cli, play: str, args: list[str], message: str
) -> None:
    assert message in one_error_line(cli("schedule", "add", "job", play, *args), 2)
    assert listed(cli) == []


def test_a_bad_name_or_a_missing_play_file_is_a_usage_error(cli: Cli, play: str) -> None:
    bad = one_error_line(cli("schedule", "add", "a b", play, "--cron", "0 9 * * *"), 2)
    assert "Schedule name 'a b'" in bad
    missing = cli("schedule", "add", "job", "nowhere.py", "--cron", "0 9 * * *")
    assert "Play file 'nowhere.py' not found" in one_error_line(missing, 2)


def test_list_without_a_store_lists_nothing(cli: Cli) -> None:
    result = cli("schedule", "list", store=False)  # PLAYLINE_STORE names a file not there
    assert result.exit_code == 0 and "No schedules" in result.stdout
    as_json = cli("schedule", "list", "--json", store=False)
    assert json.loads(as_json.stdout) == []


def test_the_worker_fires_a_due_schedule_and_its_run_reads_from_where_add_ran(
    cli: Cli, play: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = cli("schedule", "add", "leads", play, "--cron", "0 9 * * *", "-i", "file=leads.csv",
                "--input-json", '{"tag": "daily"}')  # fmt: skip
    assert added.exit_code == 0, added.output
    with closing(open_store(cli.store)) as db:  # its time has come (the worker's clock is real)
        schedule = db.get_schedule("leads")
        assert schedule is not None
        assert db.advance_schedule(
            "leads",
            expected_next=schedule.next_fire,
            next_fire=time.time() - 5,
            last_fire=None,
            last_run_id=None,
        )
    elsewhere = tmp_path / "worker"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    done = cli("worker", "--burst", "--json")
    assert done.exit_code == 0, done.output
    [ran] = cli.json_lines(done.stdout)
    assert ran["status"] == "completed" and str(ran["run_id"]).startswith("sched-leads-")
    shown = json.loads(cli("show", str(ran["run_id"]), "--json").stdout)
    assert shown["output"] == {"rows": 2, "tag": "daily"}
    [leads] = listed(cli)
    assert (leads["last_run_id"], leads["last_run_status"]) == (ran["run_id"], "completed")
    assert float(str(leads["next_fire"])) > time.time()  # moved on to the next 09:00
    again = cli("worker", "--burst", "--json")
    assert again.exit_code == 0 and cli.json_lines(again.stdout) == []


def test_with_temporal_the_schedule_is_a_temporal_schedule(
    cli: Cli, play: str, temporal_server: TemporalServer
) -> None:
    """add, list, pause, resume and delete reach the server (the other side of the
    hook-in, the runs it starts, is tests/temporal/test_temporal_schedules.py's)."""
    name = f"cli-{uuid.uuid4().hex[:8]}"
    on = ["--temporal", temporal_server.target]
    added = cli("schedule", "add", name, play, "--cron", "0 9 * * MON",
                "--timezone", "Europe/Paris", "-i", "file=leads.csv", *on)  # fmt: skip
    assert added.exit_code == 0, added.output

    def mine() -> list[dict[str, object]]:
        result = cli("schedule", "list", "--json", *on, store=False)
        assert result.exit_code == 0, result.output
        return [s for s in json.loads(result.stdout) if s["name"] == name]

    # Temporal lists schedules from its visibility store, a moment behind: poll for it
    deadline = time.monotonic() + 30
    while not (found := mine()) and time.monotonic() < deadline:
        time.sleep(0.05)
    [schedule] = found
    assert (schedule["play"], schedule["cron"], schedule["timezone"]) == (
        "cli-scheduled-leads",
        "0 9 * * MON",
        "Europe/Paris",
    )
    assert cli("schedule", "pause", name, *on, store=False).exit_code == 0
    assert cli("schedule", "resume", name, *on, store=False).exit_code == 0
    assert cli("schedule", "delete", name, *on, store=False).exit_code == 0
    assert listed(cli) == []  # nothing was written to the store
