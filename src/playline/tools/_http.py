"""Declared HTTP tools (``pl.HttpTool``): a provider's endpoint described, not programmed.

A declaration says how a call becomes a request (method, URL template, query, JSON body or
form from the input, auth from a secret, an idempotency header), what the answer means (the
outcome rules of ``_outcomes.py``) and where a found answer's result is (a dotted path, then
``outputs`` as for every tool). A bulk form (``HttpBulk``) packs many inputs in one request
and maps the per-item answers back, each through the same rules, with its own status where the
provider gives one. An async form (``HttpPoll``) polls a job a ``pending`` answer named.

The engine sees what it sees of every tool: a result (found), None (not found), a
``JobState`` (pending), or a ``ToolError`` whose ``outcome`` says what to do (wait, stop the
account for the run, try again, fail). Rates, retries, receipts and budgets are the engine's.

Requests go through one pooled ``httpx.AsyncClient`` per provider account and event loop,
with timeouts, connection limits, and the proxies of the environment (``HTTPS_PROXY``...).
"""

from __future__ import annotations

import asyncio
import csv
import functools
import io
import re
import string
import urllib.parse
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import orjson

from .._json import digest
from .._secrets import Secret, Secrets, redact, reveal
from ..errors import PlayDefinitionError, ToolError
from ._normalize import Normalize
from ._outcomes import Answer, Outcome, Reported, match, remaining_of, wait_of
from ._result import Charged, dotted
from ._spec import Batch, Cost, JobState, Rate, ToolSpec, normalise_lists, normalise_outputs
from ._tokens import TOKEN_HEADERS, Tokens, as_tokens, heard, requests_said, tokens_said

__all__ = ["Auth", "HttpBulk", "HttpPoll", "HttpTool", "request_or_raise"]

CLIPPED = 300  # characters of an unexpected answer's body kept in its error
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
_USED_UP = frozenset({"quota_exhausted", "insufficient_credits"})
_PLACE = "_place"  # in a bulk item template: the item's place in its request ("0", "1"...)
_SINGLE = "single"  # a bulk tool's job that is a lone input's single job: {"single": id}
_FIELDS = string.Formatter()
RequestHook = Callable[[dict[str, Any]], Mapping[str, Any]]
ResponseHook = Callable[[Answer], Any]


@dataclass(frozen=True)
class Auth:
    """How a request proves its account, from a secret: an environment variable's name
    (read as ``ctx.secrets.get`` reads it) or a ``pl.Secret``. The key never enters an input,
    so rotating it keeps every receipt."""

    kind: Literal["bearer", "header", "query", "basic", "body"]
    secret: str | Secret
    name: str = ""  # the header or query parameter; basic: the user name

    @classmethod
    def bearer(cls, secret: str | Secret) -> Auth:
        """``Authorization: Bearer <secret>``."""
        return cls("bearer", secret)

    @classmethod
    def header(cls, name: str, secret: str | Secret) -> Auth:
        """A header of the provider's: ``X-Api-Key: <secret>``."""
        return cls("header", secret, name)

    @classmethod
    def query(cls, name: str, secret: str | Secret) -> Auth:
        """A query parameter: ``?api_key=<secret>``."""
        return cls("query", secret, name)

    @classmethod
    def body(cls, name: str, secret: str | Secret) -> Auth:
        """A field of the JSON body (ZeroBounce's batch: ``{"api_key": ...}``), or of the
        query for a request without one (its single ``GET /validate?api_key=``)."""
        return cls("body", secret, name)

    @classmethod
    def basic(cls, secret: str | Secret, user: str = "") -> Auth:
        """HTTP basic auth: the secret as the password (as the user when ``user`` is blank,
        which is how providers that use a key as the user name expect it)."""
        return cls("basic", secret, user)

    def __post_init__(self) -> None:
        if self.kind not in ("bearer", "header", "query", "basic", "body"):
            raise PlayDefinitionError(
                f"Auth kind {self.kind!r}: bearer, header, query, body or basic."
            )
        if not isinstance(self.secret, Secret) and not (
            isinstance(self.secret, str) and self.secret
        ):
            raise PlayDefinitionError(
                "pl.Auth needs the secret's environment variable name (e.g. 'HUNTER_API_KEY') "
                "or a pl.Secret."
            )
        if self.kind in ("header", "query", "body") and not (
            isinstance(self.name, str) and self.name
        ):
            raise PlayDefinitionError(
                f"pl.Auth.{self.kind}(name, secret) needs the {self.kind} name, e.g. 'X-Api-Key'."
            )

    @property
    def label(self) -> str:
        """What names the account, never the key: the variable's name."""
        return self.secret.name if isinstance(self.secret, Secret) else self.secret

    def value(self) -> str:
        secret = self.secret if isinstance(self.secret, Secret) else Secrets().get(self.secret)
        return secret.reveal()

    def apply(
        self, headers: dict[str, str], params: dict[str, Any], body: Any = None
    ) -> httpx.BasicAuth | None:
        """Put the secret where the provider reads it (``body``: the request's JSON object,
        if it has one); returns basic auth when it is that."""
        key = self.value()
        if self.kind == "bearer":
            headers["Authorization"] = f"Bearer {key}"
        elif self.kind == "header":
            headers[self.name] = key
        elif self.kind == "body" and isinstance(body, dict):
            body[self.name] = key
        elif self.kind in ("query", "body"):
            params[self.name] = key
        else:
            return httpx.BasicAuth(self.name or key, "" if not self.name else key)
        return None


@dataclass(frozen=True, kw_only=True)
class HttpBulk:
    """Many inputs in one request. ``items``: the body path the list of items goes to
    (``""``: the body is the list); each item is built by ``item`` (a template, as ``json=``)
    or is the input. ``results``: the answer's path to the list of per-item answers, aligned
    with the items; ``item_status``: each one's status path (per-item statuses go through
    the outcome rules); ``item_result``: where each one's result is. ``body``: fixed fields
    sent beside the items (NeverBounce's ``{"input_location": "supplied"}``). ``match``: the
    answers are found by what they echo (input field -> answer path; ``_place`` is the
    item's place in the request, which an ``item`` template can send as ``"{_place}"``), not
    by position; an input no answer is for fails its call (``missing="fail"``) or is not
    found (``missing="not_found"``: Prospeo lists only the records it matched). ``poll``: a
    bulk job's poll, when it differs from the single one's."""

    max_size: int
    url: str | None = None  # the bulk endpoint, when it is not the single one
    method: str = "POST"
    items: str = "items"
    item: Mapping[str, Any] | None = None
    results: str = "results"
    item_status: str | None = None
    item_result: str | None = None
    max_wait: float | None = None  # seconds a partial batch may wait for more (pl.Batch)
    body: Mapping[str, Any] | None = None  # fixed fields of the request's body, beside items
    poll: HttpPoll | None = None  # a bulk job's poll, when it is not the single one's
    match: Mapping[str, str] | None = None  # input field -> answer path: answers matched by it
    missing: Literal["fail", "not_found"] = "fail"  # an input no matched answer is for

    def __post_init__(self) -> None:
        Batch(max_size=self.max_size, max_wait=self.max_wait)  # the same rules
        if not isinstance(self.method, str) or self.method.upper() not in _METHODS:
            raise PlayDefinitionError(
                f"HttpBulk(method={self.method!r}): one of {sorted(_METHODS)}."
            )


@dataclass(frozen=True, kw_only=True)
class HttpPoll:
    """An async job's poll: ``url`` with ``{job}`` for the job id a ``pending`` answer gave,
    asked every ``interval`` seconds; its answers go through ``outcomes`` (a poll that says
    "not ready" is ``pending``) and the result is at ``result``. ``echo`` maps input fields
    to where the answer repeats them: an answer for another input fails the call
    (``job_mismatch``) instead of being kept as found. ``expired``: rules (any outcome name;
    only their status and body are read) for an answer that says the job's result is no
    longer kept (Apollo keeps one 30 days): the call fails with ``job_expired``, and is bought
    again only when the run is resumed with ``--retry-failed``. ``fetch``: where a finished
    job's results are, when the poll only says it is done (a URL with ``{job}``);
    ``fetch_format="csv"`` reads them as a file of rows (one per item, in order).
    ``max_wait``: a job still pending that long after its submit is left in doubt (its
    provider may have lost it: Dropcontact answers a lost job "not ready" for ever); a resume
    polls it again. ``json``
    and ``fetch_json``: the JSON bodies of the poll and of the fetch (templates taking
    ``{job}``), for providers that are asked by POST (Icypeas: ``{"id": "{job}"}``); a fetch
    with a body is a POST."""

    url: str
    method: str = "GET"
    json: Any = None
    interval: float = 1.0
    backoff: float = 1.0  # each wait that many times the one before
    max_interval: float | None = None  # the longest wait between polls
    max_wait: float | None = None  # seconds after which a job still pending is left in doubt
    outcomes: Sequence[Outcome] = ()
    result: str | None = None
    echo: Mapping[str, str] = field(default_factory=dict)  # input field -> answer path
    expired: Sequence[Outcome] = ()
    fetch: str | None = None
    fetch_format: Literal["json", "csv"] = "json"
    fetch_json: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.method, str) or self.method.upper() not in _METHODS:
            raise PlayDefinitionError(
                f"HttpPoll(method={self.method!r}): one of {sorted(_METHODS)}."
            )
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise PlayDefinitionError(
                f"HttpPoll(url={self.url!r}): the poll's URL, with {{job}} for the job id, "
                "e.g. 'https://api.acme.com/v1/jobs/{job}'."
            )
        if not (isinstance(self.interval, int | float) and 0 < self.interval < float("inf")):
            raise PlayDefinitionError(f"HttpPoll(interval={self.interval!r}): seconds, > 0.")
        if not (isinstance(self.backoff, int | float) and 1 <= self.backoff < float("inf")):
            raise PlayDefinitionError(
                f"HttpPoll(backoff={self.backoff!r}): each wait that many times the one "
                "before, a number >= 1 (1: the same wait each time)."
            )
        if self.max_interval is not None and not (
            isinstance(self.max_interval, int | float) and self.max_interval >= self.interval
        ):
            raise PlayDefinitionError(
                f"HttpPoll(max_interval={self.max_interval!r}): the longest wait in seconds, "
                f"at least interval ({self.interval})."
            )
        if self.max_wait is not None and not (
            isinstance(self.max_wait, int | float) and self.max_wait >= self.interval
        ):
            raise PlayDefinitionError(
                f"HttpPoll(max_wait={self.max_wait!r}): the seconds a job may stay pending, "
                f"at least interval ({self.interval})."
            )
        if not all(isinstance(o, Outcome) for o in self.outcomes):
            raise PlayDefinitionError(
                "HttpPoll(outcomes=...): a list of pl.Outcome rules, e.g. "
                '[pl.Outcome("pending", body={"status": "IN_PROGRESS"})].'
            )
        if self.fetch is not None and not (
            isinstance(self.fetch, str) and self.fetch.startswith(("http://", "https://"))
        ):
            raise PlayDefinitionError(
                f"HttpPoll(fetch={self.fetch!r}): the URL of a finished job's results, with "
                "{job} for the job id, e.g. 'https://api.acme.com/v1/jobs/{job}/results'."
            )
        if self.fetch_format not in ("json", "csv"):
            raise PlayDefinitionError(
                f"HttpPoll(fetch_format={self.fetch_format!r}): 'json' or 'csv'."
            )
        if not all(isinstance(o, Outcome) for o in self.expired):
            raise PlayDefinitionError(
                "HttpPoll(expired=...): a list of pl.Outcome rules for the answers that say "
                'the result is gone, e.g. [pl.Outcome("fatal", status=410)].'
            )


class HttpTool:
    """A tool declared as an HTTP endpoint (``docs/guide/http-tools.md``).

    ``pl.HttpTool("acme.find_email", "GET", "https://api.acme.com/v1/find?domain={domain}",
    auth=pl.Auth.header("X-Api-Key", "ACME_API_KEY"), outcomes=[pl.Outcome("not_found",
    status=404)], result="data", cost=pl.Cost(1, charge="on_hit"))``

    Without ``query``/``json``/``form``, a GET sends the input as its query and other
    methods as their JSON body. Templates take ``{field}`` from the input: a string that is
    only ``"{field}"`` keeps the value's type, and a key whose fields are all missing is left
    out. Used as a decorator, the function maps the input to the request's parts (``url``,
    ``query``, ``json``, ``form``, ``headers``) where a template cannot say it; ``response=``
    maps an answer to the result in Python.

    Token limits (``Rate(tokens_per_minute=...)``, ``tools/_tokens.py``): ``tokens(input)``
    estimates a call's tokens before it goes out (an int, or ``(input, output)``),
    ``tokens_used(answer)`` reads what a successful answer says it used (None: it does not
    say), and ``token_headers`` names headers saying what is left (``{"tokens": [(remaining,
    reset)], "output": [...]}``), read besides OpenAI's and Anthropic's.
    """

    def __init__(
        self,
        id: str,
        method: str,
        url: str,
        *,
        query: Mapping[str, Any] | None = None,
        json: Any = None,
        form: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Auth | None = None,
        outcomes: Sequence[Outcome] = (),
        result: str | None = None,
        outputs: Mapping[str, str | Sequence[str]] | None = None,
        lists: Mapping[str, str] | None = None,
        bulk: HttpBulk | None = None,
        poll: HttpPoll | None = None,
        rate: Rate | None = None,
        cost: Cost | float | None = None,
        idempotency: str | None = None,
        repeat_free: bool = False,
        reported: Reported | None = None,
        account: str | None = None,
        timeout: float = 30.0,
        response: ResponseHook | None = None,
        normalize: Mapping[str, str] | Callable[..., Any] | None = None,
        tokens: Callable[[Mapping[str, Any]], int | tuple[int, int]] | None = None,
        tokens_used: Callable[[Answer], int | tuple[int, int] | None] | None = None,
        token_headers: Mapping[str, Sequence[tuple[str, str]]] | None = None,
        version: str = "1",
        description: str = "",
    ) -> None:
        method = _checked(id, method, url, outcomes, (query, json, form))
        _check_types(
            id,
            auth=(auth, Auth, "pl.Auth.bearer('ACME_API_KEY')"),
            bulk=(bulk, HttpBulk, "pl.HttpBulk(max_size=100, ...)"),
            poll=(poll, HttpPoll, "pl.HttpPoll(url='https://.../jobs/{job}')"),
            rate=(rate, Rate, "pl.Rate(per_second=5)"),
            cost=(cost, Cost | int | float, "pl.Cost(1, charge='on_hit') or a number"),
            idempotency=(idempotency, str, "'Idempotency-Key'"),
            reported=(reported, Reported, "pl.Reported(header='x-call-credits-spent')"),
        )
        names = _token_checked(id, rate, tokens, tokens_used, token_headers)
        _headers_checked(id, headers, idempotency)
        if not (isinstance(timeout, int | float) and 0 < timeout < float("inf")):
            raise PlayDefinitionError(f"pl.HttpTool({id!r}, timeout={timeout!r}): seconds, > 0.")
        self.id = id
        self.method = method
        self.url = url
        self._parts = {"query": query, "json": json, "form": form}
        self._headers = dict(headers or {})
        self.auth = auth
        self.outcomes = tuple(outcomes)
        self.result = result
        self.bulk = bulk
        self.polling = poll
        self.idempotency = idempotency
        self.repeat_free = repeat_free
        self.reported = reported
        self._heard: tuple[int, float] | None = None  # the last remaining-budget headers
        # token limits (``tools/_tokens.py``): the estimate the engine's token gate takes
        # before a call (None: the tool has none), what an answer says it used, the headers
        # that say what the account has left
        self._tokens = tokens
        self.tokens: Callable[[Mapping[str, Any]], int | tuple[int, int]] | None = (
            None if tokens is None else self._estimate
        )
        self._tokens_used = tokens_used
        self._token_headers = names
        # what the account has left, asked of its provider (``playline.providers``): an
        # async callable with a ``unit``; the engine spends no more than it says
        self.balance: Any = None
        self.timeout = timeout
        self._response = response
        self._request: RequestHook | None = None
        self.inline = False
        timing = poll or (bulk.poll if bulk else None)  # a single job's, else a bulk job's
        self.poll_interval = timing.interval if timing else 1.0
        self.poll_backoff = timing.backoff if timing else 1.0
        self.poll_max_interval = timing.max_interval if timing else None
        self.poll_max_wait = timing.max_wait if timing else None
        # a bulk job's waits between polls, when its poll is its own (HttpBulk(poll=))
        self.bulk_timing = (
            (bulk.poll.interval, bulk.poll.backoff, bulk.poll.max_interval, bulk.poll.max_wait)
            if bulk is not None and bulk.poll is not None
            else None
        )
        cost = Cost(cost) if isinstance(cost, int | float) else cost or Cost()
        self.account = (
            account
            or digest("http", urllib.parse.urlsplit(url).netloc, auth.label if auth else "")[:16]
        )
        self.spec = ToolSpec(
            id=id,
            transport=self,
            jobs=self if poll or (bulk and bulk.poll) else None,
            rate=rate or Rate(),
            cost=cost,
            batch=Batch(max_size=bulk.max_size, max_wait=bulk.max_wait) if bulk else None,
            outputs=normalise_outputs(outputs),
            lists=normalise_lists(lists),
            version=str(version),
            # a call in doubt is sent again only if the repeat cannot be charged again: it
            # carries its own key (a bulk request's key is its items', and a resend may group
            # them otherwise), or the provider does not charge a repeat (``repeat_free``)
            in_doubt="resend"
            if (idempotency and not bulk) or repeat_free or not cost.priced
            else "fail",
            auth_scope=self.account,
            description=description,
            normalize=None if normalize is None else Normalize(f"pl.HttpTool({id!r})", normalize),
        )

    def __repr__(self) -> str:
        return f"HttpTool({self.id!r}, {self.method!r}, {self.url!r})"

    def __call__(self, request: RequestHook) -> HttpTool:
        """As a decorator: ``request(input)`` gives the request's parts in Python."""
        if not callable(request):
            raise PlayDefinitionError(
                f"@pl.HttpTool({self.id!r}, ...) decorates a function input -> request parts."
            )
        self._request = request
        return self

    def specs(self) -> list[ToolSpec]:
        return [self.spec]

    def describe(self) -> dict[str, Any]:
        """The declaration as JSON (``playline tools describe``): the request, the key's
        variable (never its value), the outcome rules in order, the bulk and poll forms."""
        polling = self.polling
        return {
            "method": self.method,
            "url": self.url,
            "request": {k: v for k, v in self._parts.items() if v is not None}
            or (
                "the input as the query"
                if self.method in ("GET", "DELETE")
                else "the input as JSON"
            ),
            "request_function": getattr(self._request, "__name__", None),
            "auth": None
            if self.auth is None
            else {"kind": self.auth.kind, "secret": self.auth.label},
            "account": self.account,
            "idempotency_header": self.idempotency,
            "repeat_free": self.repeat_free,
            "reported_cost": None if self.reported is None else _reported_doc(self.reported),
            "outcomes": [_rule_doc(rule) for rule in self.outcomes]
            + ["429: rate_limited", "2xx: found (not_found when the result is empty)"],
            "result": self.result,
            "bulk": None
            if self.bulk is None
            else {**_plain(vars(self.bulk)), "poll": _poll_doc(self.bulk.poll)},
            "poll": _poll_doc(polling),
        }

    # the transport (tools/_spec.py)
    async def call(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> list[Any]:
        if self.bulk is not None and (len(inputs) > 1 or self.bulk.url is None):
            return await self._call_bulk(inputs, keys)
        results = []
        for index, item in enumerate(inputs):
            state = await self.submit(spec, item, keys[index] if keys else None)
            if not state.done:  # a tool with poll= is polled by the engine, never sent here
                raise self._no_poll()
            results.append(state.result)
        return results

    # the jobs (tools/_spec.py): a pending answer is polled by the engine
    async def submit(
        self, spec: ToolSpec, input: Mapping[str, Any], key: str | None = None
    ) -> JobState:
        request = self._build(dict(reveal(dict(input))))
        answer = await self._send(request, key)
        return self._state(self.outcomes, answer, self.result, reported=self._reported(answer))

    async def poll(self, spec: ToolSpec, job: Any, input: Mapping[str, Any]) -> JobState:
        """Where ``job`` stands; its answer is checked against ``input`` where the provider
        echoes it (``HttpPoll(echo=...)``)."""
        polling, answer = await self._poll_answer(job)
        answer = await self._fetched(polling, job, answer)
        state = self._state(
            polling.outcomes, answer, polling.result, job, reported=self._reported(answer)
        )
        if state.done and state.result is not None:
            self._check_echo(polling, answer, input)
        return state

    # bulk async jobs (``bulk=`` and ``poll=``): one job for many inputs
    async def submit_bulk(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> JobState:
        """Submit ``inputs`` as one job (Dropcontact's batch, Icypeas' bulk search): pending
        with the job's id, or done with the per-item results, aligned with ``inputs``. A lone
        input goes to the single form when the bulk form has a URL of its own (Icypeas'
        single search), its job kept as ``{"single": id}`` and polled by the single poll."""
        assert self.bulk is not None
        if len(inputs) == 1 and self.bulk.url is not None:
            state = await self.submit(spec, inputs[0], keys[0] if keys else None)
            if state.done:
                return JobState(done=True, result=[state.result])
            return JobState(done=False, job={_SINGLE: state.job}, wait=state.wait)
        key = digest("bulk", *keys) if keys else None  # the same items again: the same request
        answer = await self._send(self._bulk_request(inputs), key)
        rule = match(self.outcomes, answer, None)
        if rule is not None and rule.outcome == "pending":
            job = dotted(answer.body, rule.job) if rule.job else None
            if job is None or job == "":
                raise self._failure(
                    answer, f"answered pending without a job id at {rule.job!r}", "bad_job"
                )
            return JobState(done=False, job=job, wait=_said_wait(rule, answer))
        return JobState(done=True, result=self._items(answer, rule, inputs, self.bulk.results))

    async def poll_bulk(
        self, spec: ToolSpec, job: Any, inputs: Mapping[int, Mapping[str, Any]]
    ) -> JobState:
        """Where a bulk ``job`` stands; once done, the results of the items asked for (by
        their place in the job: ``inputs``), each checked against its input where the
        provider echoes it."""
        if isinstance(job, Mapping) and _SINGLE in job:  # a lone input's single job
            ((item, input),) = inputs.items()
            state = await self.poll(spec, job[_SINGLE], input)
            if not state.done:
                return JobState(done=False, job=job, wait=state.wait)
            return JobState(done=True, result={item: state.result})
        assert self.bulk is not None
        polling, answer = await self._poll_answer(job, self.bulk.poll)
        answer = await self._fetched(polling, job, answer)
        rule = match(polling.outcomes, answer, polling.result)
        if rule is not None and rule.outcome == "pending":
            return JobState(done=False, job=job, wait=_said_wait(rule, answer))
        if rule is None or rule.outcome not in ("found", "not_found"):
            raise self._refusal(rule, answer)
        parts = answer.body if polling.result is None else dotted(answer.body, polling.result)
        if not isinstance(parts, list) or (
            self.bulk.match is None and len(parts) <= max(inputs, default=-1)
        ):
            raise self._misaligned(answer, polling.result, f"item {max(inputs)} of job {job!r}")
        mine = self._aligned(parts, inputs)
        results = {}
        for item, input in inputs.items():
            results[item] = self._item(answer, mine[item], None)
            if results[item] is not None and not isinstance(results[item], ToolError):
                part = Answer(answer.status, mine[item], answer.headers, _text(mine[item]))
                self._check_echo(polling, part, input)
        return JobState(done=True, result=results)

    async def _fetched(self, polling: HttpPoll, job: Any, answer: Answer) -> Answer:
        """Where the poll only says the job is done, its results from ``fetch`` (a JSON
        answer, or a CSV file read as its rows); otherwise the poll's own answer."""
        if polling.fetch is None:
            return answer
        rule = match(polling.outcomes, answer, None)
        if rule is None or rule.outcome not in ("found", "not_found"):
            return answer  # pending, or refused: the poll's answer says so
        url = polling.fetch.replace("{job}", urllib.parse.quote(str(job), safe=""))
        body = None if polling.fetch_json is None else _fill(polling.fetch_json, {"job": job})
        fetched = await self._send(
            _Request("GET" if body is None else "POST", url, json=body),
            None,
            json=polling.fetch_format == "json",
        )
        if polling.fetch_format == "csv" and 200 <= fetched.status < 300:
            rows = list(csv.DictReader(io.StringIO(fetched.text)))
            return Answer(fetched.status, rows, fetched.headers, fetched.text)
        return fetched

    async def _poll_answer(
        self, job: Any, polling: HttpPoll | None = None
    ) -> tuple[HttpPoll, Answer]:
        """The poll's answer for ``job`` (by ``polling``, else the tool's poll); an answer
        that says its result is gone (``expired``) is the call's ``job_expired`` failure."""
        polling = polling or self.polling
        if polling is None:
            raise self._no_poll()
        url = polling.url.replace("{job}", urllib.parse.quote(str(job), safe=""))
        body = None if polling.json is None else _fill(polling.json, {"job": job})
        answer = await self._send(_Request(polling.method.upper(), url, json=body), None)
        if any(rule.matches(answer) for rule in polling.expired):
            raise ToolError(
                self.id,
                f"the provider no longer keeps the result of job {job!r} "
                f"({_clip(answer.text) or 'empty body'}); resume the run with --retry-failed "
                "to buy it again",
                status=answer.status,
                code="job_expired",
                request_id=_request_id(answer),
                outcome="fatal",
            )
        return polling, answer

    def _check_echo(self, polling: HttpPoll, answer: Answer, input: Mapping[str, Any]) -> None:
        """A job's answer for another input (a provider that lost the job and numbered a new
        one the same) fails the call: it is never stored as found."""
        for field_name, path in polling.echo.items():
            sent, said = reveal(input.get(field_name)), dotted(answer.body, path)
            if said is not None and _same(sent) != _same(said):
                raise ToolError(
                    self.id,
                    f"job answered for another input: {field_name} was sent as {sent!r}, the "
                    f"answer at {path!r} says {said!r}; it is not kept as found",
                    status=answer.status,
                    code="job_mismatch",
                    outcome="fatal",
                )

    def _no_poll(self) -> ToolError:
        return ToolError(
            self.id,
            "the provider answered pending, and the tool declares no poll= to ask again",
            code="no_poll",
            outcome="fatal",
        )

    # requests
    def _build(self, input: dict[str, Any]) -> _Request:
        parts: dict[str, Any] = dict(self._parts)
        if self._request is not None:
            parts.update(self._hook(self._request, dict(input), "request"))
        url = _url(self.id, str(parts.pop("url", None) or self.url), input)
        query, json_body, form = (
            _fill(parts.get(name), input) for name in ("query", "json", "form")
        )
        if self._parts == {"query": None, "json": None, "form": None} and self._request is None:
            if self.method in ("GET", "DELETE"):
                query = _present(input)
            else:
                json_body = _present(input)
        return _Request(
            self.method, url, query or {}, json_body, form, dict(parts.get("headers") or {})
        )

    def _bulk_request(self, inputs: Sequence[Mapping[str, Any]]) -> _Request:
        bulk = self.bulk
        assert bulk is not None
        items = [
            _fill(bulk.item, {**i, _PLACE: str(place)}) if bulk.item is not None else _present(i)
            for place, i in enumerate(reveal([dict(i) for i in inputs]))
        ]
        body: Any = items
        if bulk.items:
            body = dict(bulk.body or {})
            _set_path(body, bulk.items, items)
        url = bulk.url or self.url  # one request for many inputs: its fields are left empty
        return _Request(
            bulk.method.upper(), url.format_map(dict.fromkeys(_fields(url), "")), {}, body
        )

    async def _call_bulk(
        self, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str]
    ) -> list[Any]:
        bulk = self.bulk
        assert bulk is not None
        key = digest("bulk", *keys) if keys else None  # the same items again: the same request
        answer = await self._send(self._bulk_request(inputs), key)
        return self._items(answer, match(self.outcomes, answer, None), inputs, bulk.results)

    def _items(
        self, answer: Answer, rule: Outcome | None, inputs: Sequence[Mapping[str, Any]], path: str
    ) -> list[Any]:
        """The per-item results of a bulk answer (its items at ``path``), aligned with
        ``inputs``: by position, or by what the provider echoes (``HttpBulk(match=)``)."""
        if rule is None or rule.outcome not in ("found", "not_found"):
            raise self._refusal(rule, answer)
        answers = answer.body if not path else dotted(answer.body, path)
        assert self.bulk is not None
        if not isinstance(answers, list) or (
            self.bulk.match is None and len(answers) != len(inputs)
        ):
            raise self._misaligned(answer, path, f"{len(inputs)} per-item answers")
        share = None  # a header's charge is the request's: its items share it
        if self.reported is not None and self.reported.header is not None:
            total = self.reported.credits(answer, self.spec.cost.credits)
            share = None if total is None else total / len(inputs)
        parts = self._aligned(answers, dict(enumerate(inputs)))
        return [self._item(answer, parts[i], share) for i in range(len(inputs))]

    def _aligned(self, parts: list[Any], places: Mapping[int, Mapping[str, Any]]) -> dict[int, Any]:
        """Each input's part of a bulk answer, by its place in the request or job (``places``):
        at that place, or the part echoing its ``HttpBulk(match=)`` fields. An input with no
        part gets the ``missing_item`` error (its call fails, nothing charged)."""
        assert self.bulk is not None
        paths = self.bulk.match
        if paths is None:
            return {place: parts[place] for place in places}
        by_echo = {_echo_key(part, paths.values()): part for part in parts}
        missing: Any = _ABSENT  # not found
        if self.bulk.missing == "fail":
            missing = ToolError(
                self.id,
                f"the provider's answer holds no item for this input (matched by {dict(paths)})",
                code="missing_item",
                outcome="fatal",
            )
        return {
            place: by_echo.get(_echo_key({**input, _PLACE: str(place)}, paths.keys()), missing)
            for place, input in places.items()
        }

    def _item(self, whole: Answer, item: Any, share: float | None) -> Any:
        """One input's result from its part of a bulk answer (its own status if it has one),
        or the ``ToolError`` the provider refused it with alone (its call fails, the other
        items stand). An item asking to wait or to be sent again fails the whole request, which
        is sent again."""
        bulk = self.bulk
        assert bulk is not None
        if item is _ABSENT:  # no part of the answer is this input's: not found
            return None
        if isinstance(item, ToolError):  # ... and that fails its call
            return item
        status = dotted(item, bulk.item_status) if bulk.item_status else None
        answer = Answer(
            status=status if isinstance(status, int) else whole.status,
            body=item,
            headers=whole.headers,
            text=_text(item),
        )
        reported = share if share is not None else self._reported(answer, item=True)
        try:
            state = self._state(
                self.outcomes, answer, bulk.item_result, reported=reported, item=True
            )
            return state.result
        except ToolError as refused:
            if refused.outcome in ("rate_limited", "blocked", "retryable"):
                raise
            return refused

    def _misaligned(self, answer: Answer, path: str | None, wanted: str) -> ToolError:
        return ToolError(
            self.id,
            f"the bulk answer did not hold {wanted} at {path or 'its top level'!r}: "
            f"{_clip(answer.text)}",
            status=answer.status,
            code="misaligned_batch",
            outcome="fatal",
        )

    def _reported(self, answer: Answer, *, item: bool = False) -> float | None:
        """What the provider says it charged for ``answer`` (None: the tool does not read
        it, or the answer does not say); a bulk item's header is its request's (shared)."""
        if self.reported is None or (item and self.reported.header is not None):
            return None
        return self.reported.credits(answer, self.spec.cost.credits)

    async def _send(self, request: _Request, key: str | None, *, json: bool = True) -> Answer:
        """The provider's answer to ``request``. A 2xx whose body is not the JSON expected
        (``json``) was cut short or garbled after the provider did the work: the call fails
        in doubt (``protocol_error``), never read as "nothing found"."""
        headers = {"Accept": "application/json", **self._headers, **request.headers}
        params = dict(request.query)
        body = dict(request.json) if isinstance(request.json, Mapping) else request.json
        basic = self.auth.apply(headers, params, body) if self.auth else None
        if key and self.idempotency:
            headers[self.idempotency] = key
        response = await request_or_raise(
            _client(self.account),
            self.id,
            request.method,
            # the URL's own query kept (httpx's params= would replace it)
            str(httpx.URL(request.url).copy_merge_params(params)) if params else request.url,
            json=body,
            data=request.form,
            headers=headers,
            auth=basic or httpx.USE_CLIENT_DEFAULT,
            timeout=self.timeout,
        )
        self._heard = (
            remaining_of(response.headers) or requests_said(response.headers) or self._heard
        )
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = None
            if json and response.is_success:
                raise ToolError(
                    self.id,
                    f"answered {response.status_code} with a body that is not JSON (cut short?): "
                    f"{_clip(response.text)}",
                    status=response.status_code,
                    code="protocol_error",
                    request_id=response.headers.get("x-request-id"),
                ) from None
        answer = Answer(response.status_code, body, response.headers, response.text)
        if self.tokens is not None:  # to the token gate of the call being sent
            said = tokens_said(answer.headers, self._token_headers)
            heard(answer.status, self._used(answer), said)
        return answer

    def _estimate(self, input: Mapping[str, Any]) -> int | tuple[int, int]:
        """The tokens a call of ``input`` is estimated at (``tokens=``), secrets revealed."""
        assert self._tokens is not None
        return self._tokens(dict(reveal(dict(input))))

    def _used(self, answer: Answer) -> Tokens | None:
        """The tokens a successful answer says the call used (``tokens_used=``), else None."""
        if self._tokens_used is None or not 200 <= answer.status < 300:
            return None
        used = self._hook(self._tokens_used, answer, "tokens_used")
        if used is None:
            return None
        try:
            return as_tokens(used, "its tokens_used function")
        except ValueError as exc:
            raise ToolError(self.id, str(exc), code="exception", outcome="fatal") from None

    def remaining(self) -> tuple[int, float] | None:
        """What the latest answer's remaining-budget headers said (requests left, seconds
        until their window resets), once: the engine slows the tool's gate to keep within
        it (``tools/_remaining.py``). None when no answer said anything since."""
        heard, self._heard = self._heard, None
        return heard

    # answers
    def _state(
        self,
        rules: Sequence[Outcome],
        answer: Answer,
        result: str | None,
        polled: Any = None,
        *,
        reported: float | None = None,
        item: bool = False,
    ) -> JobState:
        """What ``answer`` means: done (a result, or None when not found), pending (the job
        it names, else the one ``polled``), or the ``ToolError`` its outcome is. A done
        answer carries what it cost when the rule or the provider says (``Charged``;
        ``reported``: the provider's figure, ``_reported``). An ``item`` of a bulk answer is
        never pending on its own (a bulk job is pending as a whole)."""
        rule = match(rules, answer, result)
        if rule is not None and rule.outcome in ("found", "not_found"):
            data = self._result(answer, result) if rule.outcome == "found" else None
            if rule.credits is not None or reported is not None:
                declared = None if rule.credits is None else float(rule.credits)
                data = Charged(data, declared, reported)
            return JobState(done=True, result=data)
        if rule is not None and rule.outcome == "pending" and not item:
            job = dotted(answer.body, rule.job) if rule.job else polled
            if job is not None and job != "":
                return JobState(done=False, job=job, wait=_said_wait(rule, answer))
        raise self._refusal(rule, answer, item=item)

    def _result(self, answer: Answer, path: str | None) -> Any:
        if self._response is not None:
            return self._hook(self._response, answer, "response")
        return answer.body if path is None else dotted(answer.body, path)

    def _hook(self, hook: Callable[[Any], Any], value: Any, what: str) -> Any:
        """A Python hook's answer; its failure is the call's (the cell fails with it)."""
        try:
            out = hook(value)
        except Exception as exc:
            raise ToolError(
                self.id,
                f"its {what} function failed: {type(exc).__name__}: {exc}",
                code="exception",
                outcome="fatal",
            ) from exc
        if what == "request" and not isinstance(out, Mapping):
            raise ToolError(
                self.id,
                f"its request function returned {type(out).__name__}; return the request's "
                "parts as a dict (url, query, json, form, headers)",
                code="exception",
                outcome="fatal",
            )
        return out

    def _refusal(self, rule: Outcome | None, answer: Answer, *, item: bool = False) -> ToolError:
        """The error an answer that gives no result is: what its rule says, or that no rule
        says what it means."""
        if rule is None:
            return self._failure(answer, "an answer no outcome rule matches", "unexpected_answer")
        if rule.outcome == "pending":
            why = (
                "answered an item of a bulk answer as pending (a bulk job is pending as a "
                "whole: declare poll= for it)"
                if item
                else f"answered pending without a job id at {rule.job!r}"
            )
            return self._failure(answer, why, "bad_job")
        if rule.outcome in ("found", "not_found"):
            return self._failure(
                answer, "a bulk answer that is not a list of answers", "bad_answer"
            )
        return self._error(rule, answer)

    def _failure(self, answer: Answer, why: str, code: str) -> ToolError:
        return ToolError(
            self.id,
            f"{why}: {_clip(answer.text) or '(empty body)'}",
            status=answer.status,
            code=code,
            request_id=_request_id(answer),
            outcome="fatal",
            key=self.auth.label if self.auth else None,
        )

    def _error(self, rule: Outcome, answer: Answer) -> ToolError:
        said = dotted(answer.body, rule.message) if rule.message else None
        words = str(said) if said is not None else _clip(answer.text) or "(empty body)"
        waits = rule.outcome in ("rate_limited", "blocked")
        return ToolError(
            self.id,
            f"{_MEANING[rule.outcome]}: {words}",
            status=answer.status,
            # a used-up account is named by its outcome (what the run's verdict and hints
            # read); the provider's own code stays in the message
            code=rule.outcome if rule.outcome in _USED_UP else _code(answer) or rule.outcome,
            request_id=_request_id(answer),
            retryable=rule.outcome in ("rate_limited", "blocked", "retryable"),
            retry_after=wait_of(rule, answer) if waits else None,
            outcome=rule.outcome,
            key=self.auth.label if self.auth else None,
        )


_MEANING = {
    "rate_limited": "rate limited by the provider",
    "blocked": "the provider blocks this account for a while",
    "quota_exhausted": "the account's quota is used up (its other calls in this run are not "
    "sent; resume the run once it is renewed)",
    "insufficient_credits": "the account is out of credits (its other calls in this run are not "
    "sent; add credits and resume the run)",
    "retryable": "the provider asks to try again",
    "fatal": "the provider refused the request",
}


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    url: str
    query: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None
    form: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


async def request_or_raise(
    client: httpx.AsyncClient, tool: str, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    """Send one request; a failure to get an answer is a ``ToolError`` whose ``code`` says
    whether the request may have reached the provider: ``connection_error`` (it did not:
    refused, or no connection in time) or ``timeout`` / ``protocol_error`` (it may have: no
    answer in time, or the connection broke). A request that cannot be built (a header or
    URL httpx or h11 refuses) left nothing on the wire: it fails as ``invalid_input``, not
    sent and never in doubt."""
    auth = kwargs.pop("auth", httpx.USE_CLIENT_DEFAULT)
    try:
        request = client.build_request(method, url, **kwargs)
    except (TypeError, ValueError, httpx.InvalidURL) as exc:
        raise _not_sent(
            tool, f"the request cannot be built ({type(exc).__name__}: {exc})"
        ) from None
    try:
        return await client.send(request, auth=auth)
    except (httpx.LocalProtocolError, httpx.UnsupportedProtocol) as exc:
        # refused while writing the request's head, before its first byte was sent
        raise _not_sent(tool, f"the request cannot be sent ({type(exc).__name__}: {exc})") from None
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        raise ToolError(
            tool,
            f"could not connect to {_where(url)} ({type(exc).__name__}: {exc})",
            code="connection_error",
        ) from None
    except httpx.TimeoutException:
        raise ToolError(
            tool, f"no answer from {_where(url)} in time (it may still be working)", code="timeout"
        ) from None
    except httpx.HTTPError as exc:
        raise ToolError(
            tool,
            f"the connection to {_where(url)} broke ({type(exc).__name__}: {exc})",
            code="protocol_error",
        ) from None


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, httpx.AsyncClient]] = (
    weakref.WeakKeyDictionary()
)


def _client(account: str) -> httpx.AsyncClient:
    """The account's pooled client on this event loop (proxies from the environment)."""
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    client = clients.get(account)
    if client is None:
        client = clients[account] = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            trust_env=True,
        )
    return client


def _checked(
    id: object, method: object, url: object, outcomes: object, parts: tuple[Any, ...]
) -> str:
    if not isinstance(id, str) or not id or " " in id:
        raise PlayDefinitionError(f"pl.HttpTool({id!r}, ...): the tool id, e.g. 'acme.find'.")
    if not isinstance(method, str) or method.upper() not in _METHODS:
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, {method!r}, ...): the method is one of {sorted(_METHODS)}."
        )
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, {method!r}, {url!r}): the URL starts with http:// or "
            "https://, e.g. 'https://api.acme.com/v1/find?domain={domain}'."
        )
    try:
        fields = [(n, spec, conv) for _, n, spec, conv in _FIELDS.parse(url) if n is not None]
        bad = next((n for n, spec, conv in fields if not _plain_field(n) or spec or conv), None)
        if bad is not None:
            raise ValueError(f"{{{bad}...}} is not a field's name alone")
    except ValueError as exc:
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, {method!r}, {url!r}): the URL template does not parse ({exc});"
            " write each field as {name}, and a literal brace as {{ or }}."
        ) from None
    if not isinstance(outcomes, Sequence) or not all(isinstance(o, Outcome) for o in outcomes):
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, outcomes=...): a list of pl.Outcome rules, e.g. "
            '[pl.Outcome("not_found", status=404)].'
        )
    if any(o.outcome == "pending" and not o.job for o in outcomes):
        raise PlayDefinitionError(
            f'pl.HttpTool({id!r}, ...): pl.Outcome("pending") needs job=, the dotted path of '
            'the job id in the answer, e.g. pl.Outcome("pending", status=202, job="request_id").'
        )
    if parts[1] is not None and parts[2] is not None:
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, ...): a request has a JSON body or a form, not both."
        )
    return method.upper()


def _token_checked(
    tool: str,
    rate: Rate | None,
    tokens: Any,
    tokens_used: Any,
    token_headers: Any,
) -> dict[str, tuple[tuple[str, str], ...]]:
    """``tokens=``, ``tokens_used=`` and ``token_headers=`` checked; returns the header names
    read for token limits (those declared, then the families recognised)."""
    for name, value in (("tokens", tokens), ("tokens_used", tokens_used)):
        if value is not None and not callable(value):
            raise PlayDefinitionError(
                f"pl.HttpTool({tool!r}, {name}=...) is a function: "
                + (
                    "input -> estimated tokens (an int, or (input, output))"
                    if name == "tokens"
                    else "answer -> the tokens it says were used, or None"
                )
            )
    if tokens is None and rate is not None and any(x is not None for x in rate.token_limits):
        raise PlayDefinitionError(
            f"pl.HttpTool({tool!r}) declares Rate(tokens_per_minute=...) without tokens=: "
            "give tokens=fn(input) -> its estimated tokens (an int, or (input, output) for "
            "output_tokens_per_minute), counted before a call goes out."
        )
    names = {kind: tuple(pairs) for kind, pairs in TOKEN_HEADERS.items()}
    if token_headers is None:
        return names
    if not isinstance(token_headers, Mapping) or not all(
        kind in names
        and isinstance(pairs, Sequence)
        and all(
            isinstance(pair, tuple | list)
            and len(pair) == 2
            and all(isinstance(h, str) and h for h in pair)
            for pair in pairs
        )
        for kind, pairs in token_headers.items()
    ):
        raise PlayDefinitionError(
            f"pl.HttpTool({tool!r}, token_headers={token_headers!r}) maps 'tokens' or "
            "'output' to (remaining header, reset header) pairs, e.g. "
            "{'tokens': [('x-tokens-left', 'x-tokens-reset')]}."
        )
    for kind, pairs in token_headers.items():
        names[kind] = (*((str(a), str(b)) for a, b in pairs), *names[kind])
    return names


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # a header's name (RFC 9110, 5.6.2)


def _headers_checked(tool: str, headers: Any, idempotency: str | None) -> None:
    """``headers=`` and ``idempotency=`` checked at declaration: a name httpx would refuse
    or a value that is not text fails the call at send time, so refuse them here."""
    if idempotency is not None and not _TOKEN.fullmatch(idempotency):
        raise PlayDefinitionError(
            f"pl.HttpTool({tool!r}, idempotency={idempotency!r}): a header name (letters, "
            "digits and !#$%&'*+-.^_`|~, no spaces), e.g. 'Idempotency-Key'."
        )
    if headers is None:
        return
    if not isinstance(headers, Mapping):
        raise PlayDefinitionError(
            f"pl.HttpTool({tool!r}, headers={headers!r}): a dict of header name to text, e.g. "
            "{'X-Api-Version': '2'}."
        )
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise PlayDefinitionError(
                f"pl.HttpTool({tool!r}, headers=...): {name!r} is not a header name (letters, "
                "digits and !#$%&'*+-.^_`|~, no spaces), e.g. 'X-Api-Version'."
            )
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise PlayDefinitionError(
                f"pl.HttpTool({tool!r}, headers=...): the value of {name!r} is {value!r}; give "
                f"text on one line, e.g. {{{name!r}: {' '.join(str(value).split())!r}}}."
            )


def _check_types(tool: str, **given: tuple[Any, Any, str]) -> None:
    for name, (value, kind, example) in given.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise PlayDefinitionError(
                f"pl.HttpTool({tool!r}, {name}={value!r}): give {example}, or leave it out."
            )


def _plain_field(name: str) -> bool:
    """A placeholder ``str.format_map`` reads as one key of the input: not empty or a
    position, no ``.attribute`` or ``[index]``."""
    return bool(name) and not name.isdigit() and not any(c in name for c in ".[]")


def _fields(template: str) -> list[str]:
    return [name for _, name, _, _ in _FIELDS.parse(template) if name]


def _fill(template: Any, input: Mapping[str, Any]) -> Any:
    """``template`` with ``{field}`` taken from ``input``; a key whose fields are all
    missing (or None) is left out, and ``"{field}"`` alone keeps the value's type."""
    if isinstance(template, Mapping):
        filled = {k: _fill(v, input) for k, v in template.items()}
        return {k: v for k, v in filled.items() if v is not _MISSING}
    if isinstance(template, list):
        return [v for v in (_fill(t, input) for t in template) if v is not _MISSING]
    if not isinstance(template, str):
        return template
    names = _fields(template)
    if not names:
        return template
    if all(input.get(n) is None for n in names):
        return _MISSING
    if template == "{" + names[0] + "}":
        return input[names[0]]
    return template.format_map({n: "" if input.get(n) is None else input[n] for n in names})


_MISSING: Any = object()
_ABSENT: Any = object()  # a bulk answer's missing item, read as not found


def _present(input: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in input.items() if v is not None}


def _url(tool: str, template: str, input: Mapping[str, Any]) -> str:
    """The URL with ``{field}`` replaced by the input's value, every character but letters,
    digits and ``-._~`` percent-quoted (``/`` too), so a value stays one path segment or one
    query value and cannot steer the request to another endpoint. A value that is missing,
    None or empty, or a path segment that is ``.`` or ``..``, would send the call to the
    wrong URL: the call fails before anything is sent (``invalid_input``)."""
    names, path = _placeholders(template)
    if not names:
        return template
    values = {}
    for name in names:
        value = input.get(name)
        text = "" if value is None else urllib.parse.quote(str(value), safe="")
        if not text:
            raise _not_sent(
                tool, f"the URL's {{{name}}} has no value ({value!r}); give the input {name!r}"
            )
        if name in path and text in (".", ".."):
            raise _not_sent(
                tool, f"the URL's path segment {{{name}}} is {text!r}, which would leave it"
            )
        values[name] = text
    return template.format_map(values)


@functools.lru_cache(maxsize=256)
def _placeholders(template: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """A URL template's fields, and those in its path (before ``?``): parsed once a template,
    not once a call."""
    return tuple(_fields(template)), frozenset(_fields(template.split("?", 1)[0]))


def _not_sent(tool: str, why: str) -> ToolError:
    """A call whose request cannot be built: it fails alone, never sent, never repeated."""
    return ToolError(tool, f"not sent: {why}", code="invalid_input", outcome="fatal")


def _set_path(body: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        body = body.setdefault(part, {})
    body[last] = value


def _text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def _clip(text: str) -> str:
    """The start of a body for a message: on one line, secrets redacted."""
    flat = " ".join(text.split())
    return redact(flat[:CLIPPED] + ("..." if len(flat) > CLIPPED else ""))


def _code(answer: Answer) -> str | None:
    if isinstance(answer.body, Mapping):
        for name in ("code", "error_code", "error"):
            value = answer.body.get(name)
            if isinstance(value, str) and value and len(value) <= 64:
                return value
    return None


def _request_id(answer: Answer) -> str | None:
    for name in ("x-request-id", "request-id", "x-amzn-requestid"):
        value = answer.headers.get(name)
        if value:
            return str(value)
    return None


def _rule_doc(rule: Outcome) -> str:
    """A rule in words: ``status 403, body {'error': 'x'}: rate_limited (wait 60 s)``."""
    when = []
    if rule.codes is not None:
        codes = sorted(rule.codes)
        when.append(
            f"status {codes[0] // 100}xx"
            if len(codes) == 100 and codes[0] % 100 == 0
            else f"status {', '.join(map(str, codes))}"
        )
    if rule.body is not None:
        when.append(
            f"body {dict(rule.body)!r}"
            if isinstance(rule.body, Mapping)
            else f"body passes {getattr(rule.body, '__name__', 'a function')}"
        )
    extra = [f"{k} {v}" for k, v in (("job at", rule.job), ("wait", rule.wait)) if v is not None]
    if rule.wait_from:
        extra.append(f"wait from {rule.wait_from}")
    return f"{', '.join(when) or 'any answer'}: {rule.outcome}" + (
        f" ({', '.join(map(str, extra))})" if extra else ""
    )


def _poll_doc(polling: HttpPoll | None) -> dict[str, Any] | None:
    if polling is None:
        return None
    return {
        "url": polling.url,
        "interval": polling.interval,
        "backoff": polling.backoff,
        "max_interval": polling.max_interval,
        "max_wait": polling.max_wait,
        "outcomes": [_rule_doc(rule) for rule in polling.outcomes],
        "result": polling.result,
        "echo": dict(polling.echo),
        "expired": [_rule_doc(rule).rsplit(": ", 1)[0] for rule in polling.expired],
        "json": polling.json,
        "fetch": polling.fetch,
        "fetch_format": polling.fetch_format,
        "fetch_json": polling.fetch_json,
    }


def _reported_doc(reported: Reported) -> str:
    if reported.header is not None:
        return f"header {reported.header}"
    if reported.path is not None:
        flag = f" (charged when it is {reported.debited!r})" if reported.debited is not None else ""
        return f"body {reported.path}{flag}"
    return f"function {getattr(reported.read, '__name__', 'read')}"


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: dict(v) if isinstance(v, Mapping) else v for k, v in values.items()}


def _said_wait(rule: Outcome, answer: Answer) -> float | None:
    """How long a ``pending`` answer asks to wait before the next poll (Apollo's
    ``retry_after_seconds``, a ``Retry-After``), or None when it does not say."""
    headers = {k.lower() for k in answer.headers}
    said = rule.wait_from and dotted(answer.body, rule.wait_from) is not None
    if said or rule.wait is not None or "retry-after" in headers:
        return wait_of(rule, answer)
    return None


def _same(value: Any) -> Any:
    """A value as an echo compares: text trimmed and case-folded."""
    return value.strip().casefold() if isinstance(value, str) else value


def _echo_key(value: Any, paths: Iterable[str]) -> tuple[str, ...]:
    """What an input or an answer says at ``paths``, compared as the providers do (trimmed,
    case-folded): how a bulk answer's items find their inputs (``HttpBulk(match=)``)."""
    return tuple(_said(dotted(value, path)).strip().casefold() for path in paths)


def _said(value: Any) -> str:
    return "" if value is None else str(value)


def _where(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"
