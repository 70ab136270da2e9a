"""Everything a store keeps comes back as it went in: hypothesis round trips for each record.

Plain text (ids, names, messages) is any Unicode but U+0000, which PostgreSQL's text cannot
hold (the PostgreSQL store says so: test_postgres_store.py); JSON values may hold it (JSON
escapes it), and so may bytes.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playline._json import dumps, loads
from playline.store import (
    Boundary,
    Claim,
    Completion,
    Event,
    Failure,
    LedgerEntry,
    RowRecord,
    RunRecord,
    RunStatus,
    Store,
)

from storehelp import ME, NOW

_unique = itertools.count()
_chars = st.characters(exclude_categories=["Cs"])
_text = st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
_name = _text.map(lambda s: f"{next(_unique)}:{s}")  # unique across examples
_opt_text = st.none() | _text
_floats = st.floats(allow_nan=False, allow_infinity=False)
_opt_floats = st.none() | _floats
_ints = st.integers(min_value=0, max_value=2**62)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | _floats
    | st.text(alphabet=_chars),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet=_chars), children, max_size=4)
    ),
    max_leaves=12,
)
_json_objects = st.dictionaries(st.text(alphabet=_chars, max_size=8), _json_values, max_size=5)

examples = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@examples
@given(values=_json_objects, result=_json_values, status=_text, error=_opt_text, at=_floats)
def test_rows(store: Store, values: dict[str, Any], result: Any, status: str, error: str | None,
              at: float) -> None:  # fmt: skip
    stored = RowRecord(
        run_id=f"r{next(_unique)}",
        dataset="d",
        key="k",
        index=0,
        status=status,
        values=values,
        cells={"c": {"value": result}},
        error=error,
        updated_at=at,
    )
    store.save_rows([stored])
    assert store.load_rows(stored.run_id, "d", ["k"])["k"] == stored
    assert list(store.iter_rows(stored.run_id, "d")) == [stored]


@examples
@given(
    key=_name,
    tool=_text,
    run_id=_text,
    request=_opt_text,
    job=st.binary(),
    result=_json_values,
    raw=st.binary(),
    error=_text,
)
def test_receipts(store: Store, key: str, tool: str, run_id: str, request: str | None,
                  job: bytes, result: Any, raw: bytes, error: str) -> None:  # fmt: skip
    [claimed] = store.claim_receipts(
        [Claim(key=key, tool=tool, run_id=run_id, request=request)],
        owner=ME,
        lease_until=NOW + 60,
        now=NOW,
    )
    store.save_jobs([(key, job)], owner=ME)
    assert store.find_receipts([key])[key] == replace(claimed.receipt, job=job)
    store.fail_receipts([Failure(key=key, error=error)], owner=ME, now=NOW)
    assert store.find_receipts([key])[key].error == error
    store.claim_receipts([Claim(key=key, tool=tool, run_id=run_id)], owner=ME, lease_until=1, now=1)
    store.complete_receipts([Completion(key=key, result=dumps(result))], owner=ME, now=NOW)
    receipt = store.find_receipts([key])[key]
    assert receipt.result is not None and loads(receipt.result) == result
    store.complete_receipts([Completion(key=key, result=raw)], owner=ME, now=NOW)
    assert store.find_receipts([key])[key].result == raw


_waiting = st.none() | st.fixed_dictionaries(
    {}, optional={"wake_at": _floats, "events": st.lists(_text, max_size=3)}
)


@examples
@given(
    run_id=_name,
    play=_text,
    status=st.sampled_from(RunStatus),
    input=_json_values,
    output=_json_values,
    error=_opt_text,
    stats=_json_objects,
    times=st.tuples(_floats, _floats),
    parent=_opt_text,
    waiting=_waiting,
    holder=_opt_text,
    lease_until=_opt_floats,
    attempts=_ints,
    stop_requested=st.booleans(),
    counters=_json_objects,
    options=_json_objects,
)
def test_runs(store: Store, run_id: str, play: str, status: RunStatus, input: Any, output: Any,
              error: str | None, stats: dict[str, Any], times: tuple[float, float],
              parent: str | None, waiting: dict[str, Any] | None, holder: str | None,
              lease_until: float | None, attempts: int, stop_requested: bool,
              counters: dict[str, Any], options: dict[str, Any]) -> None:  # fmt: skip
    record = RunRecord(
        run_id=run_id,
        play=play,
        status=status,
        input=input,
        output=output,
        error=error,
        stats=stats,
        created_at=times[0],
        updated_at=times[1],
        parent_run_id=parent,
        waiting=waiting,
        holder=holder,
        lease_until=lease_until,
        attempts=attempts,
        stop_requested=stop_requested,
        counters=counters,
        options=options,
    )
    assert store.create_run(record)
    assert store.get_run(run_id) == record


@examples
@given(
    run_id=_name,
    kind=_text,
    at=_floats,
    texts=st.lists(_opt_text, min_size=7, max_size=7),
    data=st.none() | _json_objects,
)
def test_events(store: Store, run_id: str, kind: str, at: float, texts: list[str | None],
                data: dict[str, Any] | None) -> None:  # fmt: skip
    dataset, row_key, column, status, provider, error, preview = texts
    event = Event(
        kind=kind,
        run_id=run_id,
        at=at,
        dataset=dataset,
        row_key=row_key,
        column=column,
        status=status,
        provider=provider,
        error=error,
        preview=preview,
        data=data,
    )
    store.append_events([event])
    assert event.seq >= 1
    assert store.read_events(run_id) == [event]


@examples
@given(
    run_id=_name,
    tool=_text,
    credits=_floats,
    found=st.booleans(),
    at=_floats,
    dataset=_opt_text,
    row_key=_opt_text,
    generation=st.integers(min_value=1, max_value=2**62),
    column=_opt_text,
)
def test_ledger(store: Store, run_id: str, tool: str, credits: float, found: bool, at: float,
                dataset: str | None, row_key: str | None, generation: int,
                column: str | None) -> None:  # fmt: skip
    entry = LedgerEntry(
        run_id=run_id,
        tool=tool,
        receipt_key=run_id,
        credits=credits,
        found=found,
        at=at,
        dataset=dataset,
        row_key=row_key,
        generation=generation,
        column=column,
    )
    store.claim_receipts(
        [Claim(key=run_id, tool=tool, run_id=run_id)], owner=ME, lease_until=NOW, now=NOW
    )
    store.complete_receipts([Completion(key=run_id, result=b"{}", charge=entry)], owner=ME, now=NOW)
    assert store.read_ledger(run_id) == [entry]
    assert store.spent(run_id) == credits


@examples
@given(
    key=_name,
    run_id=_text,
    kind=_text,
    status=_text,
    output=st.none() | st.binary(),
    wake_at=_opt_floats,
    at=_floats,
    payload=st.binary(),
)
def test_boundaries_and_events_sent(store: Store, key: str, run_id: str, kind: str, status: str,
                                    output: bytes | None, wake_at: float | None, at: float,
                                    payload: bytes) -> None:  # fmt: skip
    boundary = Boundary(
        key=key,
        run_id=run_id,
        kind=kind,
        status=status,
        output=output,
        wake_at=wake_at,
        updated_at=at,
    )
    store.put_boundary(boundary)
    assert store.get_boundary(key) == boundary
    assert store.send_event(key, payload, now=at)
    wait = Boundary(key=key + "/wait", run_id=run_id, kind="event", status="waiting")
    assert store.deliver_event(key, wait) == payload
    delivered = store.get_boundary(key + "/wait")
    assert delivered is not None and delivered.output == payload
