"""pl.sinks.webhook against a real receiver: every chunk delivered once, signed; a process
killed while a chunk's request is out, then resumed, re-sends only that chunk, with the same
Idempotency-Key; a refused chunk fails the run naming it, and a resume goes on from it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import playline as pl
from playline.store import open_store

if TYPE_CHECKING:
    from conftest import Receiver

PLAY = textwrap.dedent(
    """
    import os
    import playline as pl

    @pl.play(name="sink-play")
    async def sink_play(ctx, input):
        rows = [{"id": i, "name": f"lead {i}", "tags": {"n": i}} for i in range(int(input["rows"]))]
        ds = await ctx.dataset("leads", rows, key="id").with_column(
            "score", lambda row: row["id"] * 10
        ).run()
        sink = pl.sinks.webhook(os.environ["SINK_URL"], secret="SINK_SECRET", chunk=3)
        return await sink.send(ctx, ds)
    """
)


@pytest.fixture
def play_file(tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "sink_play.py"
    path.write_text(PLAY, encoding="utf-8")
    monkeypatch.setenv("SINK_URL", receiver.url)
    monkeypatch.setenv("PLAYLINE_SECRET_SINK_SECRET", receiver.secret or "")
    return path


def _load(path: Path) -> pl.Play:
    import runpy

    return runpy.run_path(str(path))["sink_play"]  # type: ignore[no-any-return]


def test_every_chunk_is_delivered_once_and_signed(
    tmp_path: Path, play_file: Path, receiver: Receiver
) -> None:
    result = pl.run(_load(play_file), {"rows": 10}, store=f"sqlite:///{tmp_path}/s.db")
    assert result.status == "completed", result.error
    assert result.output == 10
    assert receiver.chunks() == {0: 1, 1: 1, 2: 1, 3: 1}
    assert all(p.signed for p in receiver.posts)
    assert len(receiver.keys()) == 4 and set(receiver.keys().values()) == {1}
    delivered = receiver.delivered()
    assert [r["id"] for c in sorted(delivered) for r in delivered[c]] == list(range(10))
    assert delivered[0][1] == {"id": 1, "name": "lead 1", "tags": {"n": 1}, "score": 10}
    assert [p.body["last"] for p in receiver.posts] == [False, False, False, True]
    assert all(p.body["run_id"] == result.run_id for p in receiver.posts)

    # the run again (a resume of a completed run): every chunk answered from the store
    again = pl.run(_load(play_file), run_id=result.run_id, store=f"sqlite:///{tmp_path}/s.db")
    assert again.status == "completed"
    assert receiver.chunks() == {0: 1, 1: 1, 2: 1, 3: 1}


def test_killed_with_a_chunk_out_then_resumed_delivers_each_chunk_once(
    tmp_path: Path, play_file: Path, receiver: Receiver
) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    receiver.hold = 2  # the receiver keeps chunk 2's first request open
    env = {**os.environ, "PLAYLINE_STORE": store}
    command = [sys.executable, "-m", "playline", "run", str(play_file), "--run-id", "run-sink"]
    child = subprocess.Popen(
        [*command, "-i", "rows=10"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not receiver.held.wait(0.05):  # the child's request for chunk 2 is held
            assert child.poll() is None, child.communicate()
        os.kill(child.pid, signal.SIGKILL)  # while chunk 2's request is out
        child.communicate()
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == -signal.SIGKILL
    receiver.release.set()
    assert receiver.chunks() == {0: 1, 1: 1, 2: 1}

    resumed = subprocess.run(
        [sys.executable, "-m", "playline", "resume", "run-sink"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    # the chunks that completed were not posted again; chunk 2 was, with the same key
    assert receiver.chunks() == {0: 1, 1: 1, 2: 2, 3: 1}
    keys = receiver.keys()
    assert len(keys) == 4, keys
    twice = [p.headers["Idempotency-Key"] for p in receiver.posts if p.body["chunk"] == 2]
    assert twice[0] == twice[1] and keys[twice[0]] == 2
    assert all(p.signed for p in receiver.posts)
    delivered = receiver.delivered()
    assert sorted(delivered) == [0, 1, 2, 3]
    assert [r["id"] for c in sorted(delivered) for r in delivered[c]] == list(range(10))
    with open_store(store) as db:
        assert db.get_run("run-sink").status.value == "completed"


def test_a_refused_chunk_fails_the_run_naming_it_and_a_resume_goes_on_from_it(
    tmp_path: Path, play_file: Path, receiver: Receiver
) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    receiver.answer[1] = 500
    failed = pl.run(_load(play_file), {"rows": 10}, store=store)
    assert failed.status == "failed"
    assert "chunk 1 of dataset 'leads'" in (failed.error or "")
    assert "500" in (failed.error or "")
    assert isinstance(failed.exception, pl.sinks.SinkError)
    assert failed.exception.chunk == 1 and failed.exception.status == 500
    assert receiver.chunks() == {0: 1, 1: 1}

    # still refused: the resume sends chunk 1 again (only it), and fails again
    again = pl.run(_load(play_file), run_id=failed.run_id, store=store)
    assert again.status == "failed"
    assert receiver.chunks() == {0: 1, 1: 2}

    del receiver.answer[1]
    resumed = pl.run(_load(play_file), run_id=failed.run_id, store=store)
    assert resumed.status == "completed", resumed.error
    assert receiver.chunks() == {0: 1, 1: 3, 2: 1, 3: 1}
    ones = {p.headers["Idempotency-Key"] for p in receiver.posts if p.body["chunk"] == 1}
    assert len(ones) == 1  # every try of chunk 1 carried the same key


def test_a_receiver_that_is_not_there_fails_the_run_naming_the_chunk(
    tmp_path: Path, play_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SINK_URL", f"http://127.0.0.1:{port}/gone")
    result = pl.run(_load(play_file), {"rows": 2}, store=f"sqlite:///{tmp_path}/s.db")
    assert result.status == "failed"
    # the rows the chunk holds: 2 of the 3 a chunk may
    assert "could not deliver chunk 0 of dataset 'leads' (rows 1-2)" in (result.error or "")


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        (("ftp://x/y",), {}, "http:// or https://"),
        (("not a url",), {}, "http:// or https://"),
        (("https://x/y",), {"chunk": 0}, "chunk=0"),
        (("https://x/y",), {"chunk": True}, "chunk=True"),
        (("https://x/y",), {"secret": ""}, "NAME of a secret"),
        (("https://x/y",), {"secret": "whsec_abcdef1234567890XYZ"}, "('whse…' is not"),
        (("https://x/y",), {"headers": {"Idempotency-Key": "k"}}, "the sink's own"),
        (("https://x/y",), {"headers": {"X-N": 1}}, "text with a text value"),
    ],
)
def test_bad_arguments_are_refused(args: tuple[str], kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(pl.PlayDefinitionError, match=says.replace("(", r"\(")):
        pl.sinks.webhook(*args, **kwargs)  # type: ignore[arg-type]


def test_send_needs_a_finished_dataset(tmp_path: Path, receiver: Receiver) -> None:
    @pl.play(name="bad-sink")
    async def bad(ctx: pl.Context, input: object) -> object:
        return await pl.sinks.webhook(receiver.url).send(ctx, [{"id": 1}])  # type: ignore[arg-type]

    result = pl.run(bad, store=f"sqlite:///{tmp_path}/s.db")
    assert result.status == "failed"
    assert "dataset must be a finished dataset" in (result.error or "")
    assert receiver.posts == []


@pytest.mark.parametrize(
    ("secret", "says"), [("short", "5 character(s) long"), ("  ", "set but empty")]
)
def test_a_weak_signing_secret_sends_nothing(
    tmp_path: Path,
    play_file: Path,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    secret: str,
    says: str,
) -> None:
    """A receiver trusts what the secret signs: one anybody could guess signs nothing."""
    monkeypatch.setenv("PLAYLINE_SECRET_SINK_SECRET", secret)

    result = pl.run(_load(play_file), {"rows": 4}, store=f"sqlite:///{tmp_path}/s.db")

    assert result.status == "failed"
    assert f"the signing secret SINK_SECRET is {says}" in (result.error or "")
    assert "secrets.token_hex(32)" in (result.error or "")
    assert receiver.posts == []
