"""The event log: store-wide sequence numbers, reserved in blocks, and paged reads."""

from __future__ import annotations

import itertools
import threading

from playline.store import Event, Store


def cell(run_id: str, n: int, seq: int = 0) -> Event:
    return Event(kind="cell", run_id=run_id, at=float(n), row_key=f"k{n}", column="email", seq=seq)


def test_event_seq_is_store_wide_and_increasing(store: Store) -> None:
    for n in range(3):
        store.append_events([cell(run, n) for run in ("r1", "r2")])
    store.append_events(
        [Event(kind="log", run_id="r1", at=9.0, preview="hi", data={"level": "info", "n": [1]})]
    )
    r1 = store.read_events("r1")
    r2 = store.read_events("r2")
    seqs = sorted(e.seq for e in r1 + r2)
    assert seqs == list(range(seqs[0], seqs[0] + 7)) and seqs[0] >= 1
    assert [e.seq for e in r1] == sorted(e.seq for e in r1)
    assert [e.row_key for e in r1] == ["k0", "k1", "k2", None]
    assert r1[-1].data == {"level": "info", "n": [1]} and r1[-1].preview == "hi"
    assert r1[0].column == "email" and r1[0].data is None
    assert store.read_events("r1", after_seq=r1[1].seq) == r1[2:]
    assert store.read_events("r1", kinds=["log"]) == r1[3:]
    assert store.read_events("r1", kinds=["log", "cell", "log"]) == r1
    assert store.read_events("r1", kinds=[]) == []
    assert store.read_events("r9") == []


def test_append_numbers_the_events_it_is_given_without_a_seq(store: Store) -> None:
    events = [cell("r1", n) for n in range(3)]
    store.append_events(events)
    assert [e.seq for e in events] == [e.seq for e in store.read_events("r1")]
    assert events[0].seq >= 1 and [e.seq - events[0].seq for e in events] == [0, 1, 2]


def test_reserve_seqs_gives_disjoint_increasing_blocks(store: Store) -> None:
    first = store.reserve_seqs(3)
    second = store.reserve_seqs(5)
    third = store.reserve_seqs(1)
    assert first >= 1 and second >= first + 3 and third >= second + 5
    # events keep the numbers they were given; unnumbered ones get numbers after every block
    reserved = [cell("r1", 0, seq=second + 4), cell("r1", 1, seq=first)]
    fresh = cell("r1", 2)
    store.append_events([*reserved, fresh])
    assert fresh.seq > third
    assert [e.seq for e in store.read_events("r1")] == [first, second + 4, fresh.seq]


def test_reserve_seqs_from_many_threads_never_overlap(store: Store) -> None:
    blocks: list[tuple[int, int]] = []
    lock = threading.Lock()

    def reserve(size: int) -> None:
        for _ in range(25):
            start = store.reserve_seqs(size)
            with lock:
                blocks.append((start, start + size))

    threads = [threading.Thread(target=reserve, args=(size,)) for size in (1, 3, 7, 10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    blocks.sort()
    assert len(blocks) == 100
    assert all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(blocks))


def test_read_events_in_pages(store: Store) -> None:
    store.append_events([cell("r1", n) for n in range(10)])
    store.append_events([cell("r2", n) for n in range(3)])
    store.append_events([cell("r1", n) for n in range(10, 12)])
    everything = store.read_events("r1")
    assert len(everything) == 12
    pages: list[list[Event]] = []
    after = 0
    while page := store.read_events("r1", after_seq=after, limit=5):
        pages.append(page)
        after = page[-1].seq
    assert [len(p) for p in pages] == [5, 5, 2]
    assert [e for p in pages for e in p] == everything
    assert store.read_events("r1", kinds=["cell"], limit=2) == everything[:2]
    assert store.read_events("r1", after_seq=everything[-1].seq) == []
