"""Durable boundaries (steps, sleeps, waits) and the inbox of events sent to runs."""

from __future__ import annotations

from playline.store import Boundary, Store


def test_boundaries_are_written_and_overwritten(store: Store) -> None:
    assert store.get_boundary("b") is None
    waiting = Boundary(key="b", run_id="r1", kind="sleep", status="waiting", wake_at=5.0)
    store.put_boundary(waiting)
    assert store.get_boundary("b") == waiting
    done = Boundary(
        key="b", run_id="r1", kind="sleep", status="completed", output=b"null", updated_at=6.0
    )
    store.put_boundary(done)
    assert store.get_boundary("b") == done


def test_an_event_sent_twice_is_kept_once(store: Store) -> None:
    assert store.send_event("approve", b'"first"', now=1.0) is True
    assert store.send_event("approve", b'"second"', now=2.0) is False
    assert store.waiting_events(["approve", "other"]) == {"approve"}
    wait = Boundary(key="w", run_id="r1", kind="event", status="waiting", updated_at=3.0)
    assert store.deliver_event("approve", wait) == b'"first"'


def test_deliver_hands_an_event_to_one_wait(store: Store) -> None:
    assert (
        store.deliver_event("nothing", Boundary(key="w", run_id="r", kind="e", status="x")) is None
    )
    assert store.get_boundary("w") is None
    store.send_event("go", b'{"ok":true}', now=1.0)
    wait = Boundary(key="w1", run_id="r1", kind="event", status="waiting", updated_at=2.0)
    assert store.deliver_event("go", wait) == b'{"ok":true}'
    assert store.get_boundary("w1") == Boundary(
        key="w1",
        run_id="r1",
        kind="event",
        status="completed",
        output=b'{"ok":true}',
        updated_at=2.0,
    )
    assert store.waiting_events(["go"]) == set()
    # the same wait may take it again (a replay); another wait may not
    assert store.deliver_event("go", wait) == b'{"ok":true}'
    other = Boundary(key="w2", run_id="r2", kind="event", status="waiting")
    assert store.deliver_event("go", other) is None
    assert store.get_boundary("w2") is None
    assert store.send_event("go", b"again", now=3.0) is False


def test_waiting_events_beyond_one_chunk(store: Store) -> None:
    keys = [f"e{i}" for i in range(1200)]
    for key in keys[::3]:
        store.send_event(key, b"1", now=1.0)
    assert store.waiting_events(keys) == set(keys[::3])
    assert store.waiting_events([]) == set()
