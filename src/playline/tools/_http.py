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

This module holds the tool and what it does with a call; the rest is the modules beside it:
``_http_request.py`` (``Auth``, templates, URLs, the declaration's checks), ``_http_forms.py``
(``HttpBulk``, ``HttpPoll``), ``_http_answer.py`` (what an answer means, ``Reading``),
``_http_doc.py`` (``describe()`` in words) and ``_http_send.py`` (the transport).
"""

from __future__ import annotations

import csv
import io
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from .._json import digest
from .._secrets import reveal
from ..errors import PlayDefinitionError, ToolError
from ._http_answer import Reading, ResponseHook, _clip, _request_id, _said_wait, _text
from ._http_doc import _plain, _poll_doc, _reported_doc, _rule_doc
from ._http_forms import HttpBulk, HttpPoll
from ._http_request import (
    _PLACE,
    Auth,
    RequestHook,
    _bulk_url_checked,
    _check_types,
    _checked,
    _fill,
    _headers_checked,
    _present,
    _set_path,
    _token_checked,
    _url,
)
from ._http_send import _client, _Request, request_or_raise
from ._normalize import Normalize
from ._outcomes import Answer, Outcome, Reported, match, remaining_of
from ._result import dotted
from ._spec import Batch, Cost, JobState, Rate, ToolSpec, normalise_lists, normalise_outputs
from ._tokens import Tokens, as_tokens, heard, requests_said, tokens_said

__all__ = ["Auth", "HttpBulk", "HttpPoll", "HttpTool", "request_or_raise"]

_SINGLE = "single"  # a bulk tool's job that is a lone input's single job: {"single": id}


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
        if bulk is not None and bulk.url is None:  # its bulk requests go to the tool's URL
            _bulk_url_checked(f"pl.HttpTool({id!r}, {method!r}, {url!r}, bulk=...)", url, own=False)
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
        self._reading = Reading(  # what its answers mean (``_http_answer.py``)
            tool=id,
            key=auth.label if auth else None,
            response=response,
            bulk=bulk,
            reported=reported,
            credits=cost.credits,
            outcomes=self.outcomes,
        )
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
        return self._reading.state(
            self.outcomes, answer, self.result, reported=self._reading.charged(answer)
        )

    async def poll(self, spec: ToolSpec, job: Any, input: Mapping[str, Any]) -> JobState:
        """Where ``job`` stands; its answer is checked against ``input`` where the provider
        echoes it (``HttpPoll(echo=...)``)."""
        polling, answer = await self._poll_answer(job)
        answer = await self._fetched(polling, job, answer)
        state = self._reading.state(
            polling.outcomes, answer, polling.result, job, reported=self._reading.charged(answer)
        )
        if state.done and state.result is not None:
            self._reading.check_echo(polling, answer, input)
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
                raise self._reading.failure(
                    answer, f"answered pending without a job id at {rule.job!r}", "bad_job"
                )
            return JobState(done=False, job=job, wait=_said_wait(rule, answer))
        return JobState(
            done=True, result=self._reading.items(answer, rule, inputs, self.bulk.results)
        )

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
            raise self._reading.refusal(rule, answer)
        parts = answer.body if polling.result is None else dotted(answer.body, polling.result)
        if not isinstance(parts, list) or (
            self.bulk.match is None and len(parts) <= max(inputs, default=-1)
        ):
            raise self._reading.misaligned(
                answer, polling.result, f"item {max(inputs)} of job {job!r}"
            )
        mine = self._reading.aligned(parts, inputs)
        results = {}
        for item, input in inputs.items():
            results[item] = self._reading.item(answer, mine[item], None)
            if results[item] is not None and not isinstance(results[item], ToolError):
                part = Answer(answer.status, mine[item], answer.headers, _text(mine[item]))
                self._reading.check_echo(polling, part, input)
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
            parts.update(self._reading.hook(self._request, dict(input), "request"))
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
        url = bulk.url or self.url  # names no field (refused at declaration): many inputs
        return _Request(bulk.method.upper(), url.format_map({}), {}, body)

    async def _call_bulk(
        self, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str]
    ) -> list[Any]:
        bulk = self.bulk
        assert bulk is not None
        key = digest("bulk", *keys) if keys else None  # the same items again: the same request
        answer = await self._send(self._bulk_request(inputs), key)
        return self._reading.items(answer, match(self.outcomes, answer, None), inputs, bulk.results)

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
        used = self._reading.hook(self._tokens_used, answer, "tokens_used")
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
