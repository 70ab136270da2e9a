"""The UI's pages and their JSON twins: runs, a run, a dataset grid, and a row's details.

Every page is a template filled in by its ES module from the JSON twin under ``/api/...``, so
everything a page shows can be read (and tested) without a browser. Run ids of child plays
hold ``/``, so a run id is always the last part of a path.

Routes::

    GET  /                          runs            GET /api/runs?status=&play=&limit=
    GET  /run/{run_id}              a run           GET /api/run/{run_id}
    GET  /grid/{run_id}?dataset=    a dataset grid  GET /api/rows/{run_id}?dataset=&offset=
                                                        &limit=&state=&column=&sort=&desc=
                                                        &cost=
    GET  /api/counts/{run_id}?dataset=    chip counts    GET /api/row/{run_id}?dataset=&key=
    GET  /api/log/{run_id}?after=         log lines      GET /api/columns/{run_id}  ledger
    GET  /api/stream/runs, /api/stream/{run_id}?dataset=&after=   server-sent events (sse.py)
    POST /api/stop|resume|export/{run_id}, /api/event           actions (actions.py)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._secrets import Secret
from .._trace import (
    SHOWN_FOR_RUNNING,
    dataset_columns,
    ledger_by_column,
    row_detail,
    row_doc,
    run_detail,
    run_status,
    run_summary,
)
from ..errors import StoreError
from ..store import CELL_STATES, ROW_STATES, RunRecord, RunStatus, Store, display_url
from . import actions, sse
from .grid import DeclaredRows, RowCosts, declared_columns, pending_rows
from .security import csp, new_nonce, new_token, secure_headers

__all__ = ["UIConfig", "create_app"]

HERE = Path(__file__).parent
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")  # the UI answers for these names always
MAX_WINDOW = 1000  # rows per window request
STATES = (*CELL_STATES, *ROW_STATES)


@dataclass
class UIConfig:
    """What the UI serves: a store (and its URL, for the ``playline resume`` it starts), the
    gateway a resumed run calls (else the one the run recorded) and the token its resumes
    get in their environment, where those resumes write their output, and the host names
    it answers for besides the loopback ones (the address it binds to, a reverse proxy's
    name): a request for any other host is refused, so a page of another site served under
    a name that resolves to this machine (DNS rebinding) reads nothing. At most
    ``max_streams`` live streams are open at once, ``max_streams_per_client`` from one
    address (all the tabs of a browser on this machine; behind a reverse proxy, everyone):
    past them a page is told to close tabs (``sse.py``)."""

    store: Store
    store_url: str
    gateway: str | None = None
    gateway_token: Secret | None = field(default=None, repr=False)
    log_dir: Path | None = None
    allowed_hosts: tuple[str, ...] = ()
    max_streams: int = 100
    max_streams_per_client: int = 40
    csrf_token: str = field(default_factory=new_token)


templates = Jinja2Templates(directory=str(HERE / "templates"))


def _int(request: Request, name: str, default: int, *, low: int = 0, high: int = 10**9) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(
            400, f"{name}={raw!r} is not a whole number; pass e.g. {name}={max(low, 0)}."
        ) from None
    if value < low:
        raise HTTPException(400, f"{name}={value} is below {low}; pass {name}={low} or more.")
    return min(high, value)  # more than the most a page holds: that most


def _run_or_404(cfg: UIConfig, run_id: str) -> RunRecord:
    run = cfg.store.get_run(run_id)
    if run is None:
        raise HTTPException(
            404,
            f"No run {run_id!r} in the store {display_url(cfg.store.url)}; the runs page lists "
            "them.",
        )
    return run


def _dataset(cfg: UIConfig, request: Request, run_id: str) -> str:
    wanted = request.query_params.get("dataset")
    if wanted:
        return wanted  # a dataset whose first rows are not written yet is still a dataset
    names = cfg.store.datasets(run_id)
    if not names:
        raise HTTPException(404, f"Run {run_id} has no dataset rows yet; open its run page.")
    return names[0]


def _started(store: Store, run_id: str, dataset: str) -> bool:
    """Whether the run started ``dataset`` (an empty one stores no row)."""
    return any(e.dataset == dataset for e in store.read_events(run_id, kinds=["dataset"]))


def _page(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    cfg: UIConfig = request.app.state.cfg
    nonce = new_nonce()
    response = templates.TemplateResponse(
        request,
        name,
        {"csrf_token": cfg.csrf_token, "nonce": nonce, **context},
        status_code=status_code,
    )
    response.headers["Content-Security-Policy"] = csp(nonce)
    return response


# pages
async def runs_page(request: Request) -> Response:
    return _page(request, "runs.html", title="Runs", states=[s.value for s in RunStatus])


async def run_page(request: Request) -> Response:
    cfg: UIConfig = request.app.state.cfg
    run_id = request.path_params["run_id"]
    await anyio.to_thread.run_sync(_run_or_404, cfg, run_id)
    return _page(request, "run.html", title=f"Run {run_id}", run_id=run_id)


async def grid_page(request: Request) -> Response:
    cfg: UIConfig = request.app.state.cfg
    run_id = request.path_params["run_id"]

    def load() -> tuple[str, list[str], list[str], dict[str, Any]]:
        run = _run_or_404(cfg, run_id)
        dataset = _dataset(cfg, request, run_id)
        names = cfg.store.datasets(run_id)  # those with rows; an empty one has its events
        ended = run_status(run) in ("completed", "completed_with_errors")
        if ended and dataset not in names and not _started(cfg.store, run_id, dataset):
            # a run that may go on (running, stopped, failed) may not have written a dataset's
            # first rows yet; a completed one has written all it ever will
            raise HTTPException(
                404,
                f"Run {run_id} has no dataset {dataset!r} (its datasets: "
                f"{', '.join(names) or 'none'}); its run page links each.",
            )
        columns = dataset_columns(cfg.store, run_id, dataset)
        computed, fields = declared_columns(cfg.store, run_id, dataset)
        return dataset, columns, [c for c in columns if c in computed], fields

    dataset, columns, computed, fields = await anyio.to_thread.run_sync(load)
    return _page(
        request,
        "grid.html",
        title=f"{dataset} · run {run_id}",
        run_id=run_id,
        dataset=dataset,
        columns=columns,
        computed=computed,
        fields=fields,
        states=STATES,
    )


# the JSON twins
def api_runs(request: Request) -> Response:
    cfg: UIConfig = request.app.state.cfg
    status = request.query_params.get("status") or None
    play = request.query_params.get("play") or None
    limit = _int(request, "limit", 100, low=1, high=1000)
    stored: RunStatus | None = None
    if status is not None and status not in SHOWN_FOR_RUNNING:
        try:
            stored = RunStatus(status)
        except ValueError:
            known = ", ".join([s.value for s in RunStatus] + list(SHOWN_FOR_RUNNING))
            raise HTTPException(400, f"Unknown status {status!r}; use one of {known}.") from None
    elif status is not None:
        stored = RunStatus.RUNNING
    now = time.time()
    records = cfg.store.list_runs(limit=limit, status=stored, play=play)
    runs = [run_summary(cfg.store, r, now=now) for r in records]
    if status is not None:
        runs = [r for r in runs if r["status"] == status]
    plays = sorted({r.play for r in cfg.store.list_runs(limit=1000)})
    return JSONResponse({"runs": runs, "plays": plays, "now": now})


def api_run(request: Request) -> Response:
    cfg: UIConfig = request.app.state.cfg
    run = _run_or_404(cfg, request.path_params["run_id"])
    doc = run_detail(cfg.store, run)
    doc["seq"] = sse.last_seq(cfg.store, run.run_id)
    return JSONResponse(doc)


def api_rows(request: Request) -> Response:
    """A window of a dataset's rows (``row_window``): ``state`` keeps the rows with a cell in
    it, ``column`` with ``state`` those whose cell of that column is (``email: not found``);
    ``sort``/``desc`` order them. While the dataset runs, the rows not stored yet come after
    the stored ones as pending placeholders (``grid.py``); ``cost=1`` adds each row's charges
    from the ledger."""
    cfg: UIConfig = request.app.state.cfg
    run_id = request.path_params["run_id"]
    _run_or_404(cfg, run_id)
    dataset = _dataset(cfg, request, run_id)
    state = request.query_params.get("state") or None
    if state is not None and state not in STATES:
        raise HTTPException(400, f"Unknown state {state!r}; use one of {', '.join(STATES)}.")
    column = request.query_params.get("column") or None
    if column is not None and state not in CELL_STATES:
        raise HTTPException(
            400, f"column={column!r} filters by a cell state: add state=, one of "
            f"{', '.join(CELL_STATES)}."
        )  # fmt: skip
    offset = _int(request, "offset", 0)
    limit = _int(request, "limit", 100, high=MAX_WINDOW)
    sort = request.query_params.get("sort") or None
    named = sort or column
    columns = dataset_columns(cfg.store, run_id, dataset) if named or offset == 0 else None
    for what, name in (("sort by", sort), ("filter", column)):
        if name is not None and columns is not None and name not in columns:
            raise HTTPException(
                400, f"Unknown column {name!r} to {what}; use one of {', '.join(columns)}."
            )
    # The seq first: a change after it reaches the page through the stream, never lost
    # between this window and the stream's start.
    seq = sse.last_seq(cfg.store, run_id)
    try:
        rows = cfg.store.row_window(
            run_id,
            dataset,
            offset=offset,
            limit=limit,
            state=state,
            sort=sort,
            descending=request.query_params.get("desc") in ("1", "true"),
            column=column,
        )
        stored = cfg.store.count_rows(run_id, dataset, state=state, column=column)
    except StoreError as exc:
        raise HTTPException(400, str(exc)) from None
    docs = [row_doc(r) for r in rows]
    if request.query_params.get("cost") == "1":
        _add_costs(request, run_id, dataset, docs, seq)
    total = stored
    expected = None
    if state is None:  # a filter keeps stored rows only: a pending row has no cell yet
        declared: DeclaredRows = request.app.state.declared
        expected = declared.expected(cfg.store, run_id, dataset, seq=seq)
        total = max(stored, expected or 0)
        start = offset + len(docs)
        docs += pending_rows(start, max(0, min(offset + limit, total) - start))
    return JSONResponse(
        {
            "run_id": run_id,
            "dataset": dataset,
            "offset": offset,
            "total": total,
            "stored": stored,
            "expected": expected,
            "seq": seq,
            "columns": columns if offset == 0 else None,
            "rows": docs,
        }
    )


def _add_costs(
    request: Request, run_id: str, dataset: str, docs: list[dict[str, Any]], seq: int
) -> None:
    """Each row's charges over every attempt, from the ledger: ``cost`` in credits, ``usd``
    for calls priced in dollars (LLMs)."""
    cfg: UIConfig = request.app.state.cfg
    costs: RowCosts = request.app.state.row_costs
    spent = costs.of(cfg.store, run_id, seq=seq)
    for doc in docs:
        credits, usd = spent.get((dataset, doc["key"]), (0.0, 0.0))
        doc["cost"] = round(credits, 6)
        doc["usd"] = round(usd, 9)


def api_counts(request: Request) -> Response:
    cfg: UIConfig = request.app.state.cfg
    run_id = request.path_params["run_id"]
    _run_or_404(cfg, run_id)
    dataset = _dataset(cfg, request, run_id)
    seq = sse.last_seq(cfg.store, run_id)
    return JSONResponse(request.app.state.counts.get(cfg.store, run_id, dataset, seq=seq))


def api_row(request: Request) -> Response:
    cfg: UIConfig = request.app.state.cfg
    run_id = request.path_params["run_id"]
    dataset = _dataset(cfg, request, run_id)
    key = request.query_params.get("key")
    if not key:
        raise HTTPException(400, "Pass the row's key: ?key=ROW_KEY.")
    doc = row_detail(cfg.store, run_id, dataset, key)
    if doc is None:
        raise HTTPException(404, f"No row {key!r} in dataset {dataset!r} of run {run_id}.")
    return JSONResponse(doc)


def api_log(request: Request) -> Response:
    cfg: UIConfig = request.app.state.cfg
    run_id = request.path_params["run_id"]
    _run_or_404(cfg, run_id)
    after = _int(request, "after", 0)
    events = cfg.store.read_events(run_id, after_seq=after, kinds=["log"], limit=1000)
    lines = [{"seq": e.seq, "at": e.at, "message": e.preview, "data": e.data} for e in events]
    return JSONResponse({"lines": lines, "seq": events[-1].seq if events else after})


def api_columns(request: Request) -> Response:
    cfg: UIConfig = request.app.state.cfg
    run_id = request.path_params["run_id"]
    _run_or_404(cfg, run_id)
    return JSONResponse(ledger_by_column(cfg.store, run_id))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
    return _page(request, "error.html", exc.status_code, title="Not found", message=exc.detail)


async def _server_error(request: Request, exc: Exception) -> Response:
    """A 500, with the security headers: Starlette answers it outside the app's middleware.
    The traceback goes to the UI's terminal (the exception is raised on), not to the page."""
    message = "The UI failed to answer; its terminal shows why. Reload to try again."
    if request.url.path.startswith("/api/"):
        return secure_headers(JSONResponse({"error": message}, status_code=500))
    return secure_headers(PlainTextResponse(message, status_code=500))


class SecureHeaders:
    """Adds the CSP and friends to every response that does not set its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                response = Response()
                response.raw_headers = list(message.get("headers", []))
                secure_headers(response)
                message = {**message, "headers": response.raw_headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def create_app(config: UIConfig) -> Starlette:
    """The UI as an ASGI app over ``config.store``."""
    routes = [
        Route("/", runs_page),
        Route("/run/{run_id:path}", run_page),
        Route("/grid/{run_id:path}", grid_page),
        Route("/api/runs", api_runs),
        Route("/api/run/{run_id:path}", api_run),
        Route("/api/rows/{run_id:path}", api_rows),
        Route("/api/counts/{run_id:path}", api_counts),
        Route("/api/row/{run_id:path}", api_row),
        Route("/api/log/{run_id:path}", api_log),
        Route("/api/columns/{run_id:path}", api_columns),
        Route("/api/stream/runs", sse.runs_stream),
        Route("/api/stream/{run_id:path}", sse.run_stream),
        *actions.routes(),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    hosts = [*LOOPBACK_NAMES, *config.allowed_hosts]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecureHeaders),
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.cfg = config
    app.state.counts = sse.CountsCache()
    app.state.declared = DeclaredRows()
    app.state.row_costs = RowCosts()
    app.state.streams = sse.Streams(
        config.store,
        app.state.counts,
        max_streams=config.max_streams,
        max_per_client=config.max_streams_per_client,
    )
    app.state.children = actions.Children()
    return app
