"""The live stream over real HTTP while a run writes cells: a reconnect with Last-Event-ID
catches up with no gap and nothing twice, and a gap past the limit asks for a reload."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import playline as pl
from playline.store import Event, RowRecord, RunRecord, RunStatus, open_store, owner_id
from playline.web import UIConfig, create_app, sse
from services import serve_asgi

from webhelp import Gate, Message, gated_play, sse_messages, wait_until

ROWS = 30


def rows_reported(db: Any, run_id: str, after: int = 0) -> list[str]:
    """The keys of the rows the store's events report (alone, or many to an event)."""
    keys = []
    for event in db.read_events(run_id, after_seq=after, kinds=["row", "rows"]):
        if event.kind == "row":
            keys.append(event.row_key)
        else:
            keys.extend(row["key"] for row in event.data["rows"])
    return keys


def read_until(response: httpx.Response, seen: list[Message], done: Any) -> None:
    for message in sse_messages(response):
        seen.append(message)
        if done(message):
            return


def test_a_reconnect_catches_up_without_gaps_or_duplicates(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/live.db"
    db = open_store(url)
    gate = Gate()
    play = gated_play(gate)
    outcome: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: outcome.update(
            result=pl.run(play, {"rows": ROWS}, store=open_store(url), run_id="live")
        )
    )
    runner.start()
    try:
        wait_until(lambda: db.get_run("live"), "the run to start")
        config = UIConfig(store=db, store_url=url)
        messages: list[Message] = []
        with serve_asgi(create_app(config)) as base, httpx.Client(timeout=60) as client:
            stream_url = f"{base}/api/stream/live?dataset=items"

            def rows_in() -> set[str]:
                return {k for m in messages if m.event == "changes" for k in m.data["rows"]}

            with client.stream("GET", stream_url) as response:
                gate.release(10)
                read_until(response, messages, lambda m: len(rows_in()) >= 10)
            last_id = next(m.id for m in reversed(messages) if m.id is not None)
            gate.release(10)  # these rows finish while no one listens
            wait_until(lambda: len(rows_reported(db, "live")) >= 20, "rows 11-20 to be stored")
            with client.stream("GET", stream_url, headers={"Last-Event-ID": last_id}) as response:
                gate.release(ROWS - 20)
                read_until(
                    response,
                    messages,
                    lambda m: (
                        m.event == "summary"
                        and m.data["status"] == "completed"
                        and (m.data["counts"] or {}).get("rows") == ROWS
                        and not m.data["counts"].get("pending")
                    ),
                )
    finally:
        gate.release(ROWS)
        runner.join()
    assert outcome["result"].status == "completed"

    (hello,) = [m for m in messages if m.event == "hello"]  # the first connection only
    changes = [m for m in messages if m.event == "changes"]
    cursor = hello.data["seq"]
    for message in changes:  # each message starts where the one before ended: no gap, no repeat
        assert message.data["after"] == cursor
        assert int(message.id or 0) == message.data["seq"] > cursor
        cursor = message.data["seq"]
    assert cursor == sse.last_seq(db, "live")
    # every row the store's events report after the first hello reached the reader once
    reported = rows_reported(db, "live", after=hello.data["seq"])
    delivered = [k for m in changes for k in m.data["rows"]]
    assert sorted(delivered) == sorted(set(reported))
    assert len(delivered) == len(set(delivered)) == ROWS
    final = {r.key: r for r in db.iter_rows("live", "items")}
    for message in changes:
        for key, row in message.data["rows"].items():
            assert row["values"] == {c: final[key].values[c] for c in row["values"]}
            assert row["cells"] == {c: final[key].cells[c]["status"] for c in row["cells"]}
    final = [m for m in messages if m.event == "summary"][-1].data["counts"]
    assert final["rows_with"]["completed"] == ROWS and final["rows"] == ROWS
    assert final["cells"] == {}  # the chips tally no cell: row_counts(cells=False)


def test_past_the_gap_limit_the_page_is_told_to_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sse, "GAP_LIMIT", 2)
    url = f"sqlite:///{tmp_path}/gap.db"
    db = open_store(url)
    gate = Gate()
    gate.release(12)
    result = pl.run(gated_play(gate), {"rows": 12}, store=db, run_id="gap")
    assert result.status == "completed"
    config = UIConfig(store=db, store_url=url)
    messages: list[Message] = []
    with (
        serve_asgi(create_app(config)) as base,
        httpx.Client(timeout=60) as client,
        client.stream("GET", f"{base}/api/stream/gap?dataset=items&after=0") as response,
    ):
        read_until(response, messages, lambda m: m.event == "summary")
    reload = next(m for m in messages if m.event == "reload")
    assert reload.data["after"] == 0 and reload.data["seq"] == int(reload.id or 0)
    assert reload.data["seq"] == sse.last_seq(db, "gap")
    assert not [m for m in messages if m.event == "changes"]


# Bounds: caps on streams, a bounded queue per stream, seqs that are seqs.

BIG = 100_000  # characters of a value: a few events fill a socket's buffers quickly


def live_run(url: str, run_id: str, keys: list[str]) -> Any:
    """A running run with one dataset of ``keys``, written as the engine would; returns its
    store."""
    db = open_store(url)
    now = time.time()
    db.create_run(
        RunRecord(run_id=run_id, play="bounded", status=RunStatus.RUNNING, created_at=now,
                  updated_at=now, holder=owner_id("test"), lease_until=now + 3600)
    )  # fmt: skip
    db.append_events(
        [Event(kind="dataset", run_id=run_id, at=now, dataset="items", status="running",
               data={"columns": ["label"], "description": "test"})]
    )  # fmt: skip
    change(db, run_id, keys, "v0", size=1)
    return db


def change(db: Any, run_id: str, keys: list[str], value: str, *, size: int = BIG) -> None:
    """Each row's ``label`` becomes ``value`` padded to ``size`` characters."""
    label = value.ljust(size, ".")
    first = db.reserve_seqs(len(keys))
    db.append_events(
        [Event(kind="row", run_id=run_id, at=time.time(), dataset="items", row_key=key,
               status="completed", seq=first + n,
               data={"cells": {"label": "completed"}, "values": {"label": label}})
         for n, key in enumerate(keys)]
    )  # fmt: skip
    db.save_rows(
        [RowRecord(run_id=run_id, dataset="items", key=key, index=n, status="completed",
                   values={"label": label}, cells={"label": {"status": "completed"}})
         for n, key in enumerate(keys)]
    )  # fmt: skip


def subscribers(app: Any) -> list[Any]:
    return [s for feed in app.state.streams.feeds.values() for s in feed.subscribers]


def bounded(app: Any) -> bool:
    """Every stream's queue holds at most MAX_QUEUED bytes, or a single message."""
    return all(s.queued <= sse.MAX_QUEUED or len(s.queue) == 1 for s in subscribers(app))


def fill_until(db: Any, app: Any, condition: Any, what: str) -> None:
    """Change rows (big values), one change per read of the feed, until ``condition()``;
    the queues stay bounded all along."""
    (feed,) = app.state.streams.feeds.values()
    for n in range(1, 40):  # ten times what it takes
        change(db, "bounded", ["k1", "k2"], f"fill{n}", size=10 * BIG)
        seq = sse.last_seq(db, "bounded")
        wait_until(lambda: (feed.seq or 0) >= seq, "the feed to read the change")  # noqa: B023
        assert bounded(app)
        if condition():
            return
    raise AssertionError(f"{what} did not happen")


def test_a_reader_that_never_reads_holds_a_bounded_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sse, "MAX_QUEUED", 4 * BIG)
    monkeypatch.setattr(sse, "POLL", 0.01)
    url = f"sqlite:///{tmp_path}/silent.db"
    db = live_run(url, "bounded", ["k1", "k2"])
    app = create_app(UIConfig(store=db, store_url=url))
    with (
        serve_asgi(app) as base,
        httpx.Client(timeout=60) as client,
        client.stream("GET", f"{base}/api/stream/bounded?dataset=items") as response,
    ):
        assert response.status_code == 200  # and never read from
        wait_until(lambda: subscribers(app), "the stream to follow the run")
        (silent,) = subscribers(app)
        fill_until(db, app, lambda: silent.behind is not None, "the silent reader to fall behind")
        behind_at = silent.behind
        for n in range(20):  # as much again as it took: the queue stays empty, only the seq moves
            change(db, "bounded", ["k1", "k2"], f"more{n}")
        wait_until(lambda: silent.behind != behind_at, "the feed to read on")
        assert bounded(app) and silent.queued == 0 and not silent.queue


def test_a_reader_that_falls_behind_reloads_and_misses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sse, "MAX_QUEUED", 4 * BIG)
    monkeypatch.setattr(sse, "POLL", 0.01)
    url = f"sqlite:///{tmp_path}/slow.db"
    keys = [f"k{n}" for n in range(1, 6)]
    db = live_run(url, "bounded", keys)
    app = create_app(UIConfig(store=db, store_url=url))
    with serve_asgi(app) as base, httpx.Client(base_url=base, timeout=60) as client:

        def window() -> tuple[int, dict[str, str]]:  # what the page shows, as of its seq
            doc = client.get("/api/rows/bounded?dataset=items&limit=100").json()
            return doc["seq"], {r["key"]: r["values"]["label"] for r in doc["rows"]}

        cursor, shown = window()
        with client.stream("GET", f"/api/stream/bounded?dataset=items&after={cursor}") as r:
            messages = sse_messages(r)
            assert next(messages).event == "summary"
            (slow,) = subscribers(app)
            fill_until(db, app, lambda: slow.behind is not None, "the slow reader to fall behind")
            reloads = 0
            for message in messages:  # it reads again, as the page does
                if message.event == "summary":
                    continue
                assert message.data["after"] == cursor  # each goes on where the last ended
                cursor = message.data["seq"]
                if message.event == "reload":
                    reloads += 1
                    _, shown = window()  # the page's reload: its window again
                    change(db, "bounded", keys, "final")
                    final = sse.last_seq(db, "bounded")
                else:
                    assert message.event == "changes"
                    for key, row in message.data["rows"].items():
                        shown[key] = row["values"]["label"]
                    if reloads and cursor >= final:
                        break
    assert reloads == 1
    stored = {r.key: r.values["label"] for r in db.iter_rows("bounded", "items")}
    assert shown == stored and {v[:5] for v in shown.values()} == {"final"}


def test_streams_past_the_caps_are_refused_with_what_to_do(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/caps.db"
    db = live_run(url, "bounded", ["k1"])
    app = create_app(UIConfig(store=db, store_url=url, max_streams=3, max_streams_per_client=2))
    path = "/api/stream/bounded?dataset=items"
    with serve_asgi(app) as base, httpx.Client(base_url=base, timeout=60) as client:
        with client.stream("GET", path) as one, client.stream("GET", "/api/stream/runs") as two:
            assert one.status_code == two.status_code == 200
            refused = client.get(path)  # a third tab of this browser (all loopback)
            assert refused.status_code == 429
            assert "close the Playline tabs you do not need" in refused.json()["error"]
            # streams of another address (the test has one): the app's own cap
            app.state.streams.open["10.0.0.9"] = 1
            refused = client.get(path)
            assert refused.status_code == 503 and "3 live views open" in refused.json()["error"]
            del app.state.streams.open["10.0.0.9"]
        wait_until(lambda: not app.state.streams.open, "the closed streams to be counted out")
        with client.stream("GET", path) as again:  # a closed tab frees its place
            assert again.status_code == 200


@pytest.mark.parametrize(
    ("query", "header"),
    [(f"after={2**63}", None), ("after=-1", None), ("after=soon", None), ("", str(2**63)),
     ("", "-5"), ("", "x")],
)  # fmt: skip
def test_a_seq_that_is_not_one_is_refused(
    demo_ui: tuple[str, str, UIConfig], query: str, header: str | None
) -> None:
    base, run_id, _ = demo_ui
    headers = {"Last-Event-ID": header} if header else {}
    answer = httpx.get(f"{base}/api/stream/{run_id}?{query}", headers=headers, timeout=60)
    assert answer.status_code == 400
    assert f"is not a seq (a whole number from 0 to {2**63 - 1})" in answer.json()["error"]


def test_the_largest_seq_is_one(demo_ui: tuple[str, str, UIConfig]) -> None:
    base, run_id, _ = demo_ui
    with (
        httpx.Client(timeout=60) as client,
        client.stream("GET", f"{base}/api/stream/{run_id}?after={2**63 - 1}") as response,
    ):
        assert response.status_code == 200
        assert next(sse_messages(response)).event == "summary"
