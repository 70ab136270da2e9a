"""The live stream over real HTTP while a run writes cells: a reconnect with Last-Event-ID
catches up with no gap and nothing twice, and a gap past the limit asks for a reload."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

import playline as pl
from playline.store import open_store
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
    assert final["rows_with"]["completed"] == ROWS and final["cells"]["completed"] == 2 * ROWS


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
