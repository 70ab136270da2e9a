"""The mutants ``make mutate`` applies (``mutate.py``): plausible bugs in the engine and the
store, each with the tests that must kill it.

A mutant names a file under ``src/``, an exact snippet of it (the anchor: it must occur once
in the file) and the snippet that replaces it, and the pytest arguments of the few tests
that guard what it breaks (files, node ids, ``-k`` expressions): a small, fast selection, as
every mutant runs its own. To add one, copy the snippet from the code as it is (indentation
included), write the bug as someone could, and name the tests that should catch it; when
none does, the invariant needs a new test.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MUTANTS", "Mutant"]


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str
    why: str  # the bug, in a few words
    file: str  # under src/
    anchor: str
    replacement: str
    tests: tuple[str, ...]
    store: str = "sqlite"  # PLAYLINE_TEST_STORE for its tests: the store whose code runs


SETTLE = "tests/engine/test_settle.py"
EDGES = "tests/engine/test_lifecycle_edges.py"
LIFECYCLE = "tests/engine/test_lifecycle.py"

MUTANTS: list[Mutant] = [
    # --- calls.py: recording and settling ---------------------------------------------------
    Mutant(
        "settle-before-commit",
        "a row sees a result before the store holds it (the settle loop moved ahead)",
        "playline/_engine/calls.py",
        """\
        try:
            kept = await self._committer.commit(record.completions, record.failures)
        except BaseException as exc:  # answered, maybe charged, and not recorded
            self._abandon(spec, requests, exc, in_doubt=True)
            if not isinstance(exc, Exception):
                raise
            return
        self._ledger.settle(spec, sum(r.reserved for r in requests), record.charged)
        for call, outcome in record.outcomes:
            if isinstance(outcome, ToolError):  # answered, unusable: a live call that failed
                self.stats.count(spec.id, "live")
                self.settle(call, FAILED, error=outcome)
            elif call.key in kept:
                self.settle(call, ANSWERED, _cached(spec, kept[call.key]))
            else:
                self.settle(call, RECORDED, outcome)
""",
        """\
        for call, outcome in record.outcomes:
            if isinstance(outcome, ToolError):  # answered, unusable: a live call that failed
                self.stats.count(spec.id, "live")
                self.settle(call, FAILED, error=outcome)
            else:
                self.settle(call, RECORDED, outcome)
        try:
            kept = await self._committer.commit(record.completions, record.failures)
        except BaseException as exc:  # answered, maybe charged, and not recorded
            self._abandon(spec, requests, exc, in_doubt=True)
            if not isinstance(exc, Exception):
                raise
            return
        self._ledger.settle(spec, sum(r.reserved for r in requests), record.charged)
""",
        (SETTLE,),
    ),
    Mutant(
        "kept-ignored",
        "our result wins over the one another owner stored first",
        "playline/_engine/calls.py",
        "            elif call.key in kept:\n",
        "            elif False:\n",
        (SETTLE,),
    ),
    Mutant(
        "commit-returns-early",
        "a row goes on (and is written) before its cells' receipts are durable",
        "playline/_engine/commits.py",
        """\
        waiter = self._results.add([*completions, *failures])
        self._start()
        return await asyncio.shield(waiter)
""",
        """\
        waiter = self._results.add([*completions, *failures])
        self._start()
        return {}
""",
        (SETTLE,),
    ),
    Mutant(
        "commit-forgets-kept",
        "the group commit drops the results other owners stored first",
        "playline/_engine/commits.py",
        "                        committer.set_result(kept)\n",
        "                        committer.set_result({})\n",
        (SETTLE,),
    ),
    Mutant(
        "commit-failure-not-in-doubt",
        "answers the store failed to record no longer count in doubt",
        "playline/_engine/calls.py",
        "            self._abandon(spec, requests, exc, in_doubt=True)\n",
        "            self._abandon(spec, requests, exc)\n",
        (EDGES, "-k", "failed_to_record"),
    ),
    Mutant(
        "second-settle-path",
        "a call's future is resolved outside settle(): followers and stats are skipped",
        "playline/_engine/calls.py",
        """\
            elif call.key in kept:
                self.settle(call, ANSWERED, _cached(spec, kept[call.key]))
""",
        """\
            elif call.key in kept:
                call.future.set_result(_cached(spec, kept[call.key]))
""",
        (LIFECYCLE, "-k", "only_settle"),
    ),
    Mutant(
        "followers-of-a-cancelled-call",
        "a call whose waiter gave up leaves the calls following it waiting for ever",
        "playline/_engine/calls.py",
        "            followers, call.followers = call.followers, []\n",
        "            followers, call.followers = ([], []) if call.future.cancelled() else "
        "(call.followers, [])\n",
        (SETTLE, "-k", "gave_up"),  # killed by the test's timeout: the follower hangs
    ),
    # --- calls.py: claims and sends ---------------------------------------------------------
    Mutant(
        "send-held-claim",
        "a call another live worker has claimed is sent as well (the claim is skipped)",
        "playline/_engine/calls.py",
        "        if outcome is ClaimOutcome.OWNED:\n",
        "        if outcome in (ClaimOutcome.OWNED, ClaimOutcome.HELD):\n",
        ("tests/durability/test_leases.py",),
    ),
    Mutant(
        "take-over-unclaimed",
        "a call whose holder died is sent without claiming it first",
        "playline/_engine/calls.py",
        "                        self._enqueue(spec, [_Request([call])], first=True)\n",
        "                        move(call, CLAIMED)\n"
        "                        taken = _Request([call], claimed=True)\n"
        "                        self._enqueue(spec, [taken], first=True)\n",
        ("tests/durability/test_leases.py", "-k", "taken_over"),
    ),
    Mutant(
        "no-idempotency-key",
        "a request goes out with a fresh key each time: the provider cannot spot a repeat",
        "playline/_engine/calls.py",
        "        return _idempotency_key(self.key, self.generation)\n",
        "        return secrets.token_hex(20)\n",
        ("tests/gateway/test_idempotency.py", "tests/durability/test_ledger.py"),
    ),
    Mutant(
        "in-doubt-not-resolved",
        "a call in doubt sent again is counted twice: in doubt and reserved",
        "playline/_engine/calls.py",
        """\
        if outcome in (ClaimOutcome.OWNED, ClaimOutcome.COMPLETED):
            self._ledger.resolve(call.key)  # was it in doubt: settled from here on
""",
        "",
        ("tests/engine/test_ledger.py", "tests/engine/test_limits.py", "-k", "doubt"),
    ),
    Mutant(
        "5xx-not-in-doubt",
        "a 5xx of a call that may have charged fails it as if nothing was charged",
        "playline/_engine/calls.py",
        "        in_doubt = decision.verdict is Verdict.FAIL_IN_DOUBT or request.maybe_charged\n",
        "        in_doubt = False\n",
        ("tests/gateway/test_gateway_failures.py", "tests/durability/test_ledger.py"),
    ),
    Mutant(
        "first-charge-forgotten",
        "a request whose first send may have been charged fails as uncharged after a 409",
        "playline/_engine/calls.py",
        "        request.maybe_charged |= maybe_charged(error, spec)\n",
        "",
        (EDGES, "-k", "timed_out_then_found"),
    ),
    Mutant(
        "5xx-doubt-released",
        "a call failed in doubt gives its worst case back to the budget",
        "playline/_engine/calls.py",
        """\
        finally:
            self._release(spec, request, in_doubt=in_doubt)
""",
        """\
        finally:
            self._release(spec, request, in_doubt=False)
""",
        ("tests/engine/test_limits.py", "-k", "in_doubt"),
    ),
    Mutant(
        "lost-poll-not-in-doubt",
        "a submitted job whose polls fail no longer counts its worst case in doubt",
        "playline/_engine/calls.py",
        "in_doubt=not lost, lost=lost)",
        "lost=lost)",
        (
            "tests/gateway/test_truthful_errors.py::"
            "test_jobs_whose_polls_fail_stay_counted_against_the_budget",
        ),
    ),
    Mutant(
        "batch-over-max-size",
        "a request holds one input more than the tool's batch size",
        "playline/_engine/calls.py",
        "            size = spec.max_batch\n",
        "            size = spec.max_batch + 1\n",
        ("tests/engine/test_batching.py",),
    ),
    Mutant(
        "send-after-stop",
        "a request the gate lets out after a stop is sent anyway",
        "playline/_engine/calls.py",
        "                if self._drain.stopping:  # since the pump let it out: nothing is sent\n",
        "                if False:\n",
        ("tests/engine/test_stops.py", "-k", "during_its_claim"),
    ),
    Mutant(
        "stopped-keeps-claims",
        "a request dropped at a stop keeps its receipts claimed",
        "playline/_engine/calls.py",
        "        if request.claimed:\n            keys = [c.key for c in request.calls]\n",
        "        if False:\n            keys = [c.key for c in request.calls]\n",
        ("tests/engine/test_stops.py",),
    ),
    Mutant(
        "claim-answered-leaks-budget",
        "a call answered at its claim keeps its reservation",
        "playline/_engine/calls.py",
        """\
                reserved = _worst(send)
                self._ledger.release(spec, request.reserved - reserved)
""",
        "                reserved = _worst(send)\n",
        # killed by the test's timeout: the budget waits for the reservation forever
        ("tests/engine/test_limits.py", "-k", "answered_at_its_claim"),
    ),
    Mutant(
        "token-of-unsent-kept",
        "a request its claim did not send keeps its rate token: racing workers pay the rate",
        "playline/_engine/calls.py",
        "        lane.gate.refund(unsent)  # a token is spent only by a request sent\n",
        "",
        (EDGES, "-k", "rate_token_back"),
    ),
    Mutant(
        "retry-behind-budget-wait",
        "a retry that comes back while its lane waits for the budget it holds is not seen",
        "playline/_engine/calls.py",
        "            if lane.retried is not None:\n                lane.retried.set()\n",
        "",
        (EDGES, "-k", "retry_holding"),  # killed by the test's timeout: the run hangs
    ),
    Mutant(
        "deferral-spends-tokens",
        "requests the budget defers go through the rate gate again and again",
        "playline/_engine/calls.py",
        "                if not first.claimed and self._ledger.waits(",
        "                if False and self._ledger.waits(",
        (EDGES, "-k", "budget_stop"),
        store="memory",  # a local rate gate: the one the waves race for
    ),
    # --- ledger.py: the budget -------------------------------------------------------------
    Mutant(
        "doubt-counted-twice",
        "a receipt in doubt found twice is counted twice against the budget",
        "playline/_engine/ledger.py",
        "                if key not in purse.doubtful:\n",
        "                if True:\n",
        ("tests/engine/test_ledger.py", "tests/engine/test_limits.py", "-k", "doubt"),
    ),
    Mutant(
        "budget-ignores-doubt",
        "the budget's room leaves out the calls in doubt",
        "playline/_engine/ledger.py",
        "        return self.limit - self.spent - self.reserved - self.in_doubt\n",
        "        return self.limit - self.spent - self.reserved\n",
        ("tests/engine/test_ledger.py", "tests/engine/test_limits.py", "-k", "doubt"),
    ),
    Mutant(
        "budget-check-skipped",
        "a reservation is granted whatever the budget's room",
        "playline/_engine/ledger.py",
        "        allowed, total = _fitting(worst, [r for r in room if r is not None])\n",
        "        allowed, total = _fitting(worst, [])\n",
        ("tests/engine/test_ledger.py", "tests/durability/test_budget.py"),
    ),
    Mutant(
        "reservation-kept",
        "a settled request keeps its reservation in flight",
        "playline/_engine/ledger.py",
        "            purse.reserved -= reserved\n",
        "            purse.reserved -= 0\n",
        ("tests/engine/test_ledger.py",),
    ),
    # --- governance.py ---------------------------------------------------------------------
    Mutant(
        "limit-off-by-one",
        "a counter stops one call short of its limit",
        "playline/_engine/governance.py",
        "        if limit is not None and total > limit:\n            raise GovernanceError(",
        "        if limit is not None and total >= limit:\n            raise GovernanceError(",
        ("tests/engine/test_limits.py", "-k", "budget"),
    ),
    # --- receipts.py: keys -----------------------------------------------------------------
    Mutant(
        "key-without-auth",
        "results bought by one account answer another's calls",
        "playline/_engine/receipts.py",
        '        [KEY_VERSION, org, tool, keyed, auth, version, ""],\n',
        '        [KEY_VERSION, org, tool, keyed, version, ""],\n',
        ("tests/engine/test_receipts.py", "-k", "key"),
    ),
    # --- store/_claims.py: the claim rules --------------------------------------------------
    Mutant(
        "completed-owned-again",
        "a claim on a completed receipt buys it again",
        "playline/store/_claims.py",
        "    if status is ReceiptStatus.COMPLETED and not force:\n",
        "    if status is ReceiptStatus.COMPLETED and force:\n",
        ("tests/store/test_claims.py",),
    ),
    Mutant(
        "live-lease-ignored",
        "a claim takes a receipt from a holder whose lease runs",
        "playline/store/_claims.py",
        """\
        if lease_live(existing.owner, existing.lease_until, now):
            return ClaimResult(ClaimOutcome.HELD, existing)
""",
        "",
        ("tests/store/test_claims.py",),
    ),
    Mutant(
        "lease-ignores-dead-owner",
        "a receipt whose process died is held until its lease runs out",
        "playline/store/_claims.py",
        "    return holder is not None and (lease_until or 0.0) > now and owner_alive(holder)\n",
        "    return holder is not None and (lease_until or 0.0) > now\n",
        ("tests/store/test_claims.py", "-k", "owner_is_gone"),
    ),
    Mutant(
        "resend-under-new-key",
        "an in-doubt input is sent again under a new key (a new generation): paid twice",
        "playline/store/_claims.py",
        "            resent = True  # the same key: the provider answers the first request again\n",
        "            resent = True  # the same key: the provider answers the first request again\n"
        "            generation += 1\n",
        ("tests/store/test_claims.py", "-k", "resent_under_its_key"),
    ),
    Mutant(
        "in-doubt-bought-again",
        "a receipt in doubt is claimed again with no resend and no retry_in_doubt",
        "playline/store/_claims.py",
        "        elif claim.retry_in_doubt:\n",
        "        elif True:\n",
        ("tests/store/test_claims.py",),
    ),
    Mutant(
        "force-every-attempt",
        "force buys again at every attempt of a run, not once per run",
        "playline/store/_claims.py",
        "    force = claim.force and not (existing.run_id == claim.run_id and existing.owner "
        "!= owner)\n",
        "    force = claim.force\n",
        ("tests/store/test_claims.py",),
    ),
    # --- store/_gates.py: shared rate gates -------------------------------------------------
    Mutant(
        "gate-pause-ignored",
        "a shared gate with no rate (none declared or learned) lets calls through a 429's pause",
        "playline/store/_gates.py",
        "            granted, tokens = (0 if self.paused_until > now else ask), self.tokens\n",
        "            granted, tokens = ask, self.tokens\n",
        ("tests/store/test_gates.py",),
        store="memory",  # the reference, which the memory store runs (SQL computes its own)
    ),
    Mutant(
        "cap-counts-self-only",
        "a shared concurrency cap counts only this process's calls",
        "playline/store/_gates.py",
        "        if other == holder or lease_live(other, lease_until, now):\n",
        "        if other == holder:\n",
        ("tests/store/test_gates.py",),
    ),
    Mutant(
        "reservation-ignores-pause",
        "a token reserved before a 429 goes out when due, through the pause that began since",
        "playline/tools/_shared_gates.py",
        "        if got.state.paused_until > asked:  # a pause began since it was reserved\n",
        "        if False:  # a pause began since it was reserved\n",
        ("tests/gates/test_reserved_tokens.py", "-k", "pause_voids"),
    ),
    Mutant(
        "refund-while-in-debt",
        "tokens given back while others are reserved let a later reservation go first",
        "playline/tools/_shared_gates.py",
        "        if gate.rate <= 0 or gate.paused_until > now or gate.available(now) < 0:\n",
        "        if gate.rate <= 0 or gate.paused_until > now:\n",
        ("tests/gates/test_reserved_tokens.py", "-k", "given_back"),
    ),
    # --- tools: the rate gate's pause on a 429 ---------------------------------------------
    Mutant(
        "local-pause-dropped",
        "a 429 no longer pauses the tool's rate gate for the other calls",
        "playline/tools/_gates.py",
        "                self.limiter.pause(wait)\n",
        "                pass\n",
        ("tests/gates/test_shared_gates.py", "-k", "429"),
    ),
    # --- store/sql/_base.py ----------------------------------------------------------------
    Mutant(
        "store-overwrites-other-result",
        "the store replaces a result another owner completed first",
        "playline/store/sql/_base.py",
        '            if status == "completed" and current_owner != owner and stored is not None:\n',
        "            if False:\n",
        ("tests/store/test_completions.py",),
    ),
    Mutant(
        "fail-any-owner",
        "a failure is written over a receipt another owner holds",
        "playline/store/sql/_base.py",
        "            \"WHERE key = ? AND owner = ? AND status = 'running'\",\n            [\n",
        "            \"WHERE key = ? AND (owner = ? OR 1 = 1) AND status = 'running'\",\n"
        "            [\n",
        ("tests/store/test_completions.py",),
    ),
    Mutant(
        "release-forgets-job",
        "a released receipt forgets its submitted job: it is submitted (and paid) again",
        "playline/store/sql/_base.py",
        '                "AND attempt = 1 AND job IS NULL",\n',
        '                "AND attempt = 1",\n',
        ("tests/store/test_completions.py",),
    ),
    Mutant(
        "renew-runs-only",
        "renewing leases skips the receipts of calls in flight",
        "playline/_engine/supervise.py",
        "        await self._io(self._store.renew_receipts, self._holder, "
        "lease_until=lease_until)\n",
        "",
        ("tests/durability/test_run_leases.py",),
    ),
    # --- more of the claim, the key, the retry and the dispatch rules ------------------------
    Mutant(
        "claim-without-lease",
        "claims are written with a lease that has run out: another worker takes them at once",
        "playline/_engine/commits.py",
        "            lease_until=now + self._lease,\n",
        "            lease_until=now,\n",
        ("tests/durability/test_leases.py", "-k", "in_flight_is_held"),
    ),
    Mutant(
        "ledger-row-twice",
        "a generation's charge is written again when it is completed again",
        "playline/store/sql/_tables.py",
        """\
    f"INSERT INTO ledger ({LEDGER_COLUMNS}) SELECT {marks(13)} WHERE NOT EXISTS "
    "(SELECT 1 FROM ledger WHERE receipt_key = ? AND generation = ?)"
""",
        """\
    f"INSERT INTO ledger ({LEDGER_COLUMNS}) SELECT {marks(13)} WHERE NOT EXISTS "
    "(SELECT 1 FROM ledger WHERE receipt_key = ? AND generation = ? AND 1 = 0)"
""",
        ("tests/store/test_completions.py", "-k", "charge"),
    ),
    Mutant(
        "retry-unsafe-5xx",
        "a 5xx of a tool whose 5xx may strike after the work is sent again: paid twice",
        "playline/tools/_retry.py",
        '        if spec.retry_safe or spec.in_doubt == "resend":\n',
        "        if True:\n",
        ("tests/gateway/test_gateway_failures.py", "tests/engine/test_limits.py", "-k", "5xx"),
    ),
    Mutant(
        "stale-after-off-by-its-limit",
        "a receipt exactly stale_after old is bought again (older than, not as old as)",
        "playline/_engine/calls.py",
        "            elif call.fresh_since is not None and answer.updated_at < call.fresh_since:\n",
        "            elif call.fresh_since is not None"
        " and answer.updated_at <= call.fresh_since:\n",
        ("tests/engine/test_receipts.py", "-k", "older_than_that"),
    ),
    Mutant(
        "retry-limit-off-by-one",
        "a tool's retry budget runs out one retry early",
        "playline/_engine/governance.py",
        "        if limit is not None and total > limit:\n            raise RetryBudgetExceeded(",
        "        if limit is not None and total >= limit:\n            raise RetryBudgetExceeded(",
        ("tests/engine/test_limits.py", "-k", "retries"),
    ),
    # --- what an answer means, inputs that compare, jobs that answer for their input -------
    Mutant(
        "exhausted-account-keeps-sending",
        "an account whose quota or credits ran out is sent the rest of the run's calls",
        "playline/_engine/calls.py",
        "                self._ledger.exhaust(spec, exc)\n",
        "                pass\n",
        ("tests/httptools/test_http_tools.py", "-k", "used_up or nothing_else"),
    ),
    Mutant(
        "inputs-keyed-unnormalised",
        "case and whitespace variants of one input are keyed (and bought) apart",
        "playline/_engine/callmaking.py",
        "            payload = written if spec.normalize is None else spec.normalize(written)\n",
        "            payload = written\n",
        ("tests/engine/test_normalize.py", "tests/gateway/test_normalized_inputs.py"),
    ),
    Mutant(
        "job-echo-unchecked",
        "a job's answer for another input is kept as found",
        "playline/tools/_http.py",
        "            self._reading.check_echo(polling, answer, input)\n",
        "            pass\n",
        ("tests/httptools/test_http_tools.py", "-k", "another_input"),
    ),
    Mutant(
        "bulk-formed-when-queued",
        "requests that queued while their gate was shut go out as they were formed, partial",
        "playline/_engine/calls.py",
        "    if size <= 1 or len(requests) < 2:\n        return\n",
        "    if True:\n        return\n",
        ("tests/engine/test_batching.py", "-k", "packed or partial_batch"),
    ),
    Mutant(
        "max-wait-ignored",
        "a partial batch of a tool with Batch(max_wait=...) goes out without waiting for more",
        "playline/_engine/dispatch.py",
        "                wait = self._gathering(tool, spec)\n",
        "                wait = 0.0\n",
        ("tests/gateway/test_batch_max_wait.py",),
    ),
    Mutant(
        "free-status-charged",
        "an answer a rule says is free (a catch-all email) is charged the declared cost",
        "playline/_engine/calls.py",
        "        if said is not None and said.credits is not None and not (said.repeat and again):",
        "        if False:",
        ("tests/httptools/test_http_tools.py", "-k", "free"),
    ),
    Mutant(
        "reported-cost-ignored",
        "a provider that reports charging more than declared is counted at the declared cost",
        "playline/_engine/calls.py",
        "        result.cost = max(declared, said.reported)\n",
        "        result.cost = declared\n",
        ("tests/httptools/test_http_tools.py", "-k", "reported"),
    ),
    Mutant(
        "lost-result-rebought",
        "a result the provider no longer keeps (an expired job's) is bought again unasked",
        "playline/store/_claims.py",
        "    if status is ReceiptStatus.LOST and not (force or claim.retry_failed):",
        "    if False:",
        ("tests/httptools/test_http_tools.py", "-k", "expired"),
    ),
    Mutant(
        "windows-ignored",
        "a gate lets out more than a window (500 a minute) allows",
        "playline/store/_gates.py",
        "        return window_room(used, self.windows, self._leaves(now))",
        "        return 10**9, 0.0",
        ("tests/httptools/test_http_tools.py", "-k", "windows"),
    ),
    Mutant(
        "sql-windows-ignored",
        "a shared gate on a SQL store lets out more than its windows allow",
        "playline/store/sql/_gate_store.py",
        "                wanted = min(wanted, room)\n",
        "",
        ("tests/store/test_gates.py", "-k", "windows"),
    ),
    Mutant(
        "remaining-ignored",
        "a provider's remaining-budget headers are not heard: the tool runs into 429s",
        "playline/_engine/calls.py",
        "                _heard(lane.gate, lane.remaining)\n",
        "                pass\n",
        ("tests/httptools/test_http_tools.py", "-k", "remaining_budget"),
    ),
    Mutant(
        "poll-backoff-ignored",
        "a job is polled at its first interval however long it stays pending",
        "playline/_engine/calls.py",
        "        self._next = wait * self._factor\n",
        "        self._next = wait\n",
        ("tests/httptools/test_http_tools.py", "-k", "back_off"),
    ),
    Mutant(
        "bulk-job-resubmitted",
        "a resumed bulk job is submitted again (a second charge) instead of polled",
        "playline/_engine/calls.py",
        "        for index, call in enumerate(calls):\n            if call.job is None:\n",
        "        for index, call in enumerate(calls):\n            if True:\n",
        ("tests/httptools/test_http_tools.py", "-k", "bulk_job"),
    ),
    Mutant(
        "fetch-ignored",
        "a job whose poll only says it is done is kept with the poll's answer, not its results",
        "playline/tools/_http.py",
        "        if polling.fetch is None:\n            return answer\n",
        "        if True:\n            return answer\n",
        ("tests/httptools/test_http_tools.py", "-k", "apart"),
    ),
    Mutant(
        "per-record-ignored",
        "a bulk request the provider counts per record spends the rate of one request",
        "playline/_engine/calls.py",
        "        self.per_record = self.target.rate.per_record\n",
        "        self.per_record = False\n",
        ("tests/httptools/test_http_tools.py", "-k", "per_record"),
    ),
    Mutant(
        "block-ignored",
        "a provider's block of an account holds only the call that heard it",
        "playline/_engine/calls.py",
        "                self._gates.block(target, exc.retry_after or 0.0)\n",
        "                pass\n",
        ("tests/httptools/test_http_tools.py", "-k", "blocked"),
    ),
    Mutant(
        "poll-wait-ignored",
        "a pending job is polled at the declared interval whatever wait its answer names",
        "playline/_engine/calls.py",
        "next(interval) if state.wait is None else state.wait",
        "next(interval)",
        ("tests/httptools/test_http_tools.py", "-k", "wait_its_answer_names"),
    ),
    Mutant(
        "account-balance-ignored",
        "what a provider account has left is not a budget: calls go out past it",
        "playline/_engine/ledger.py",
        "            room.append(left)\n",
        "            pass\n",
        ("tests/providers/test_hunter.py", "-k", "stops_before"),
    ),
    Mutant(
        "cut-short-read-as-not-found",
        "a 2xx answer cut short is read as nothing found (and kept on a receipt)",
        "playline/tools/_http.py",
        "            if json and response.is_success:\n",
        "            if False:\n",
        ("tests/providers/test_leadmagic.py", "-k", "cut_short"),
    ),
    Mutant(
        "refused-item-fails-its-request",
        "an item of a bulk answer the provider refused fails the whole request, paid items too",
        "playline/tools/_http_answer.py",
        "            return refused\n",
        "            raise refused\n",
        ("tests/providers/test_pdl.py", "-k", "credits_running_out_inside"),
    ),
    # --- incremental datasets and fresh cells (datasets.py, previous.py) -------------------
    Mutant(
        "stale-cell-reuses-stale-receipts",
        "a cell computed again for stale_after is answered by the receipts as old as it was",
        "playline/_engine/datasets.py",
        "        since = None if column.stale_after is None else now - column.stale_after\n"
        "        row.fresh_since = since\n",
        "        since = None if column.stale_after is None else now - column.stale_after\n"
        "        row.fresh_since = None\n",
        ("tests/engine/test_fresh_cells.py", "-k", "stale_after_keeps"),
    ),
    Mutant(
        "kept-cell-ages-from-its-keeping",
        "a kept cell gets the time of the run that kept it, so it never goes stale",
        "playline/_engine/datasets.py",
        '        meta["kept_from"] = previous.run_id\n',
        '        meta["kept_from"] = previous.run_id\n        meta["updated_at"] = now\n',
        ("tests/engine/test_fresh_cells.py", "-k", "as_old_as"),
    ),
    Mutant(
        "net-new-skips-failed-rows",
        "a row an earlier run failed counts as seen, and net_new never runs it again",
        "playline/_engine/previous.py",
        '                if net_new and row.status == "completed":\n',
        "                if net_new:\n",
        ("tests/engine/test_fresh_cells.py", "-k", "earlier_run_failed"),
    ),
    # --- triggers: schedules and hooks ------------------------------------------------------
    Mutant(
        "schedule-fire-named-at-random",
        "a fire's run is named anew by each worker: two workers on one store both run it",
        "playline/triggers/_schedules.py",
        '{name}-{datetime.fromtimestamp(fire, UTC):%Y%m%dT%H%M%SZ}"\n',
        "{name}-{__import__('uuid').uuid4().hex}\"\n",
        ("tests/triggers/test_schedules.py", "-k", "two_workers or died_between"),
    ),
    Mutant(
        "hook-signature-unchecked",
        "a webhook's signature is not checked: anyone who finds the URL starts runs",
        "playline/web/hooks.py",
        '        return _error(401, "invalid signature")\n',
        "        pass\n",
        ("tests/triggers/test_hooks.py", "-k", "refused_delivery"),
    ),
    Mutant(
        "hook-delivery-unsigned",
        "the signature covers the body only: a captured request replayed under a new "
        "Playline-Delivery id starts a new run each time",
        "playline/triggers/_signing.py",
        '    signed = f"{timestamp}.".encode() + delivery + b"\\n" + body\n',
        '    signed = f"{timestamp}.".encode() + body\n',
        ("tests/triggers/test_hooks.py", "-k", "replayed"),
    ),
    Mutant(
        "hook-empty-secret-served",
        "a hook whose secret is set but empty is served: anyone signs with the empty key "
        "(and a webhook sink signs with it)",
        "playline/triggers/_signing.py",
        "    if not secret.strip():\n",
        "    if False:\n",
        ("tests/triggers/test_hooks.py", "-k", "empty_or_short"),
    ),
    Mutant(
        "run-id-unchecked",
        "a new run takes any id: one pasted into a printed command runs a shell command, and "
        "one taking a hook's id makes its real delivery a duplicate that never runs",
        "playline/_runner.py",
        "            check_new_run_id(run_id)  #",
        "            pass  #",
        ("tests/triggers/test_hooks.py", "-k", "hook_s_run_id"),
    ),
    Mutant(
        "stale-after-never-stale",
        "ctx.tool(stale_after=N) reuses a receipt however old it is",
        "playline/_engine/callmaking.py",
        "        limits = [] if stale_after is None else [self._clock.now() - stale_after]\n",
        "        limits: list[float] = []\n",
        ("tests/engine/test_receipts.py", "-k", "older_than_that"),
    ),
    # --- ledger: money as a unit of its own -----------------------------------------------
    Mutant(
        "usd-budget-unheld",
        "max_usd is never checked: LLM calls spend past the budget in dollars",
        "playline/_engine/ledger.py",
        '"usd": _Purse(max_usd, spent_usd)}',
        '"usd": _Purse(None, spent_usd)}',
        ("tests/llm/test_dollars.py", "-k", "max_usd_stops"),
    ),
    Mutant(
        "one-purse-for-every-unit",
        "dollars are counted in the credits budget: a credits budget refuses LLM calls",
        "playline/_engine/ledger.py",
        "        unit = spec.cost.unit\n        room = [ledger._purses[unit].room()",
        '        unit = "credits"\n        room = [ledger._purses[unit].room()',
        ("tests/llm/test_dollars.py", "-k", "never_refuses"),
    ),
    Mutant(
        "worst-case-of-the-first-call",
        "a request reserves its first call's worst case for all: costlier calls overspend",
        "playline/_engine/ledger.py",
        "        return [_exact(cost.most(one)) for one in inputs]\n",
        "        return [_exact(cost.most(inputs[0]))] * len(inputs)\n",
        ("tests/engine/test_ledger.py", "-k", "its_own_worst_case"),
    ),
    # --- tools/_tokens.py: token-aware limits ---------------------------------------------
    Mutant(
        "tokens-one-bucket-for-every-model",
        "every model's tokens share one bucket: a second model waits on the first's limit",
        "playline/tools/_tokens.py",
        '        return "" if first is None else str(self._scope(first))\n',
        '        return ""\n',
        ("tests/gates/test_token_windows.py", "-k", "each_model"),
    ),
    Mutant(
        "tokens-429-counted",
        "a call answered 429 keeps its estimate: the bucket drains on refusals",
        "playline/tools/_tokens.py",
        "        if self._throttled and self._used is None:\n",
        "        if False:\n",
        ("tests/gates/test_token_windows.py", "-k", "429"),
    ),
    # --- tools/_shared_tokens.py: token buckets shared through the store -----------------
    Mutant(
        "shared-tokens-per-process",
        "a shared gate's token buckets are each process's: N processes send N times the limit",
        "playline/tools/_shared_tokens.py",
        "    return token_gate(spec, clock, shared)\n",
        "    return token_gate(spec, clock)\n",
        ("tests/gates/test_shared_tokens.py", "-k", "two_processes"),
    ),
    Mutant(
        "shared-tokens-partial-goes",
        "a call goes with what the bucket held, not waiting for the rest of its estimate",
        "playline/tools/_shared_tokens.py",
        "            while got < wanted:\n",
        "            while got < wanted and not got:\n",
        ("tests/gates/test_shared_tokens.py", "-k", "holds_and_waits"),
    ),
    Mutant(
        "shared-tokens-correction-lost",
        "a correction by the answer's usage never reaches the store: other processes miss it",
        "playline/tools/_shared_tokens.py",
        "        if back:\n",
        "        if False:\n",
        ("tests/gates/test_shared_tokens.py", "-k", "correction"),
    ),
    Mutant(
        "shared-tokens-header-ignores-debt",
        "a header's count ignores the reservations not sent yet: the bucket stays too full",
        "playline/tools/_shared_tokens.py",
        "        target = left - max(0.0, -held)\n",
        "        target = left\n",
        ("tests/gates/test_shared_tokens.py", "-k", "reservations_not_sent"),
    ),
    Mutant(
        "url-value-leaves-its-segment",
        "a row's value with '/' and '..' in an HttpTool's URL sends the call to another endpoint",
        "playline/tools/_http_request.py",
        '        text = "" if value is None else urllib.parse.quote(str(value), safe="")\n',
        '        text = "" if value is None else urllib.parse.quote(str(value), safe="/")\n',
        ("tests/httptools/test_http_urls.py", "-k", "one_path_segment"),
    ),
    Mutant(
        "unbuildable-request-in-doubt",
        "a request h11 refuses to write (nothing sent) is recorded as in doubt: maybe charged",
        "playline/tools/_http_send.py",
        "    except (httpx.LocalProtocolError, httpx.UnsupportedProtocol) as exc:\n",
        "    except httpx.UnsupportedProtocol as exc:\n",
        ("tests/httptools/test_http_urls.py", "-k", "cannot_be_built"),
    ),
    Mutant(
        "stopped-rows-not-pending",
        "rows read and not started when a run stops are counted nowhere: the run page shows "
        "rows that were never stored",
        "playline/_engine/datasets.py",
        "            self._pending += len(todo)\n",
        "            pass\n",
        ("tests/engine/test_stops.py", "-k", "pending"),
    ),
    Mutant(
        "pool-timeout-ends-the-run",
        "no connection within the pool's timeout ends the run instead of being made again",
        "playline/store/sql/_postgres.py",
        "        except PoolTimeout as exc:  # before anything was written: made again (StoreIO)\n"
        "            raise ConnectionLost(\n",
        "        except PoolTimeout as exc:  # before anything was written: made again (StoreIO)\n"
        "            raise StoreError(\n",
        ("tests/durability/test_store_reconnect.py", "-k", "outage"),
    ),
    Mutant(
        "repeat-after-a-lost-answer-free",
        "an answer free as a repeat is recorded free after a request whose answer was lost",
        "playline/_engine/calls.py",
        " and not (said.repeat and again):\n",
        ":\n",
        ("tests/providers/test_prospeo.py", "-k", "cut_short"),
    ),
    Mutant(
        "paid-unusable-bought-again",
        "a charged answer that cannot be kept is bought again, and paid, on every run",
        "playline/_engine/calls.py",
        "        lost = entry is not None and entry.credits > 0\n",
        "        lost = False\n",
        ("tests/engine/test_results.py", "-k", "bought_again"),
    ),
    Mutant(
        "child-counted-per-attempt",
        "a done child replayed by each attempt counts again: a parent resumed often fails",
        "playline/_engine/children.py",
        "            return loads(stored.output)  # counted when it ran\n",
        '            self._governor.spend("children_per_parent")\n'
        "            return loads(stored.output)  # counted when it ran\n",
        ("tests/boundaries/test_child_plays.py", "-k", "counts_once"),
    ),
    Mutant(
        "verifier-tool-not-tallied",
        "a code step's second tool (a verifier) answered from receipts is not counted at what "
        "the run paid: show's waterfall credits fall short of the ledger",
        "playline/_engine/waterfalls.py",
        "            if any(r.tool != self.results[0].tool for r in self.results):\n",
        "            if False:\n",
        ("tests/waterfall/test_tallies.py", "-k", "two_tools"),
    ),
]
