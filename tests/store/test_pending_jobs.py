"""The jobs a run waits on: receipts with a submitted job and no result yet, of the run and its
child plays, oldest claim first (what ``playline show`` and the UI list as jobs in
progress)."""

from __future__ import annotations

from playline.store import Failure, ReceiptStatus, Store

from storehelp import ME, NOW, claim, complete, fail


def test_pending_jobs_are_a_runs_receipts_waiting_on_a_submitted_job(store: Store) -> None:
    claim(store, "late", now=NOW + 5, tool="openai.batch")
    claim(store, "early", "stopped", "done", "refused", "plain", tool="openai.batch")
    claim(store, "child", run_id="r1/step", now=NOW + 2, tool="dropcontact.enrich")
    claim(store, "other", run_id="r10", tool="openai.batch")  # another run, alike in name
    jobs = [(key, b'{"job": "batch_1", "item": 0}') for key in
            ("late", "early", "stopped", "done", "refused", "child", "other")]  # fmt: skip
    store.save_jobs(jobs, owner=ME)
    complete(store, ("done", b"{}"))  # answered: no longer waiting
    fail(store, ("refused", "400 bad input"))  # failed: no longer waiting
    # stopped while polling: in doubt, its job kept for a resume to poll
    store.fail_receipts([Failure(key="stopped", error="stopped", in_doubt=True)], owner=ME, now=NOW)

    pending = store.pending_jobs("r1")

    assert [r.key for r in pending] == ["early", "stopped", "child", "late"]
    assert {r.key: r.status for r in pending}["stopped"] is ReceiptStatus.UNKNOWN
    assert pending[0].job == b'{"job": "batch_1", "item": 0}'
    assert pending[0].tool == "openai.batch" and pending[0].updated_at == NOW
    assert [r.key for r in store.pending_jobs("r1/step")] == ["child"]
    assert store.pending_jobs("r2") == []
