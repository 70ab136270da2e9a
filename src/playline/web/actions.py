"""What the UI can do to a run: stop it, resume it, export a dataset, send an event.

Each is a POST that needs the page's CSRF token (``security.py``). Stop asks the attempt that
holds the run, through the store, to stop before its next paid call (the run ends
``suspended``; nothing paid is lost); resume starts ``playline resume -- RUN_ID`` on the same
store in a process of its own (the store's URL and the gateway's token in its environment,
never on its command line; the gateway the run recorded unless the UI was given one), which a
thread of the UI waits for, so that none is left a zombie; export streams CSV or JSON lines
from the read model; send delivers the event a suspended run awaits.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import playline as pl

from .._flatten import defused, flat
from .._secrets import Secret
from .._trace import SOURCE_KIND, export_table, run_status
from ..errors import PlaylineError
from ..store import RunRecord, display_url
from .security import check_csrf, form_fields

__all__ = ["Children", "routes"]

RESUMABLE = ("failed", "suspended", "interrupted", "completed_with_errors")


class Children:
    """The ``playline resume`` processes this UI started, each waited for by a thread of its
    own as soon as it starts: one that ends is reaped then, not left a zombie (``<defunct>``)
    until another starts or the UI stops."""

    def __init__(self) -> None:
        self.started: dict[str, subprocess.Popen[bytes]] = {}

    def running(self, run_id: str) -> bool:
        child = self.started.get(run_id)
        return child is not None and child.poll() is None

    def start(
        self,
        run_id: str,
        command: list[str],
        log: Path,
        store_url: str,
        gateway_token: Secret | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` with the store's URL (``PLAYLINE_STORE``) and the gateway's
        token (``PLAYLINE_GATEWAY_TOKEN``, when the UI has one) in its environment: a command
        line is visible to every user of the machine (``ps``), and both are credentials."""
        for done in [k for k, c in self.started.items() if c.poll() is not None]:
            del self.started[done]
        env = {**os.environ, "PLAYLINE_STORE": store_url}
        if gateway_token is not None:
            env["PLAYLINE_GATEWAY_TOKEN"] = gateway_token.reveal()
        # the user's alone (it may hold rows' values), and never a link someone else put there
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "ab") as out:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C of the UI does not stop the run
            )
        threading.Thread(target=child.wait, name=f"reap-{child.pid}", daemon=True).start()
        self.started[run_id] = child
        return child


def _error(message: str, status: int = 409) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _guarded(request: Request, *, writes: bool = True) -> tuple[Any, Response | None]:
    """The UI's config, and the answer refusing the action: a request without the page's
    token, or one that ``writes`` to a store this UI could only open read-only."""
    cfg = request.app.state.cfg
    refused = await check_csrf(request, cfg.csrf_token)
    if refused is None and writes and getattr(cfg.store, "read_only", False):
        refused = _error(
            "This UI opened the store read-only (its user cannot write it): it shows the "
            "runs, and stop, resume and sending an event need a user who can write the store."
        )
    return cfg, refused


async def stop(request: Request) -> Response:
    cfg, refused = await _guarded(request)
    if refused:
        return refused
    run_id = request.path_params["run_id"]
    run: RunRecord | None = await anyio.to_thread.run_sync(cfg.store.get_run, run_id)
    if run is None:
        return _error(f"No run {run_id!r} in the store.", 404)
    status = run_status(run)
    if status == "interrupted":
        return _error(
            f"Run {run_id} is not running: its process stopped mid-run ({run.holder}). "
            "Nothing needs stopping; Resume continues it."
        )
    if status != "running":
        return _error(f"Run {run_id} is {status}, not running: there is nothing to stop.")
    if not await anyio.to_thread.run_sync(cfg.store.request_stop, run_id):
        return _error(f"Run {run_id} ended before it could be asked to stop.")
    return JSONResponse(
        {
            "run_id": run_id,
            "stop_requested": True,
            "message": "Asked to stop: it stops before its next paid call (within a few "
            "seconds), ends suspended, and Resume continues it.",
        }
    )


def resume_command(cfg: Any, run_id: str) -> list[str]:
    """``playline resume`` of ``run_id``, which comes after ``--``: no run id is read as an
    option (``--help``). The store and the token are not on it: ``Children.start`` passes
    them; without ``--gateway``, the resume calls the gateway the run recorded."""
    command = [sys.executable, "-m", "playline", "resume"]
    if cfg.gateway:
        command += ["--gateway", cfg.gateway]
    return [*command, "--", run_id]


def _needs_token(cfg: Any, run_id: str) -> bool:
    """Whether the run's resume would have no gateway token although the run was given one
    (``playline run`` records where it came from): it would stop at once, asking for it."""
    if cfg.gateway_token is not None or os.environ.get("PLAYLINE_GATEWAY_TOKEN"):
        return False
    sources = cfg.store.read_events(run_id, kinds=[SOURCE_KIND])
    return bool(sources) and bool((sources[0].data or {}).get("gateway_token"))


def shown_command(cfg: Any, command: list[str]) -> str:
    """The command as the UI tells it: the store as its environment passes it, without the
    password (``display_url``)."""
    return f"PLAYLINE_STORE={shlex.quote(display_url(cfg.store_url))} {shlex.join(command[2:])}"


RESUME_WATCH = 3.0  # seconds a resume is watched for an early end before the UI answers


def private_log_dir() -> Path:
    """The folder the resumes' logs go to when the UI is given none: ``playline-<uid>`` in
    the temp folder, this user's alone (0700). One that is not (a link, another user's, or
    open to others: someone made it first) is refused, as ssh refuses such a key folder."""
    folder = Path(tempfile.gettempdir()) / f"playline-{os.getuid()}"
    with suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    found = folder.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise PermissionError(
            f"{folder} is not a folder of this user's alone (mode 0700): remove it, or set "
            "TMPDIR to another folder for `playline ui`"
        )
    return folder


def log_name(run_id: str) -> str:
    """The file a resume's output goes to: the run id's first characters that are safe in a
    file name, and a hash of the whole id, so any id (a long one, one with "/") has one."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:40]
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:12]
    return f"playline-resume-{safe}-{digest}.log"


async def resume(request: Request) -> Response:
    cfg, refused = await _guarded(request)
    if refused:
        return refused
    run_id = request.path_params["run_id"]
    children: Children = request.app.state.children
    run: RunRecord | None = await anyio.to_thread.run_sync(cfg.store.get_run, run_id)
    if run is None:
        return _error(f"No run {run_id!r} in the store.", 404)
    status = run_status(run)
    if run.parent_run_id is not None:
        return _error(f"Run {run_id} is a child play: resume its parent {run.parent_run_id}.")
    if status not in RESUMABLE or children.running(run_id):
        why = "a resume this UI started is still running" if status in RESUMABLE else status
        return _error(f"Run {run_id} cannot be resumed now ({why}).")
    if cfg.store_url.startswith("memory://"):
        return _error(
            "This UI reads an in-memory store, which another process cannot open: resume the "
            "run in the process that holds the store (pl.run(play, run_id=...)).",
            400,
        )
    if await anyio.to_thread.run_sync(_needs_token, cfg, run_id):
        return _error(
            f"Run {run_id} called its gateway with a token, which is never stored, and this UI "
            "has none to give its resume: start it with `playline ui --gateway-token TOKEN` "
            "(or with PLAYLINE_GATEWAY_TOKEN set), then resume."
        )
    try:
        log = (cfg.log_dir or private_log_dir()) / log_name(run_id)
        command = resume_command(cfg, run_id)
        child = children.start(run_id, command, log, cfg.store_url, cfg.gateway_token)
    except OSError as exc:
        return _error(f"Cannot start the resume: its log file: {exc}", 500)
    code = await anyio.to_thread.run_sync(_ended_at_once, child)
    if code not in (None, 0, 3):  # 3: suspended again, as a run may be
        return _error(
            f"The resume ended at once (exit {code}): {_last_line(log)} Its output: {log}.", 500
        )
    message = f"Resuming in process {child.pid}; its output goes to {log}."
    if code is not None:
        message = f"Resumed: the run is {'completed' if code == 0 else 'suspended'} ({log})."
    return JSONResponse(
        {
            "run_id": run_id,
            "pid": child.pid,
            "command": shown_command(cfg, command),
            "log": str(log),
            "message": message,
        },
        status_code=202,
    )


def _ended_at_once(child: subprocess.Popen[bytes]) -> int | None:
    """The resume's exit code if it ended within ``RESUME_WATCH`` seconds (a store it cannot
    open, a full disk, a play file gone: said at once, not left in a log), else None."""
    try:
        return child.wait(timeout=RESUME_WATCH)
    except subprocess.TimeoutExpired:
        return None


def _last_line(log: Path) -> str:
    """The last line a resume wrote: the error it ended with."""
    with suppress(OSError):
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        if lines:
            return lines[-1].strip()[:500]
    return "it wrote nothing."


def _csv_lines(rows: Iterator[dict[str, Any]], fields: list[str]) -> Iterator[str]:
    """CSV with the cells a spreadsheet would run as formulas escaped, as `playline export`."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, extrasaction="ignore")
    writer.writerow({name: defused(name) for name in fields})
    for row in rows:
        writer.writerow({k: defused(flat(v)) for k, v in row.items()})
        if buffer.tell() > 1 << 16:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _attachment(filename: str) -> str:
    """``Content-Disposition`` for a download named ``filename`` (RFC 6266): the exact name,
    UTF-8 and percent-encoded, in ``filename*``; for clients that read only ``filename``, a
    copy in printable ASCII with ``_`` for anything else and for ``"``, ``\\``, ``%``, ``;``.
    A name holding CR/LF, a quote or a ``;`` (a dataset's name is the play's to choose)
    neither ends the header nor adds parameters to it."""
    fallback = re.sub(r'[^\x20-\x7e]|["\\%;]', "_", filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


async def export(request: Request) -> Response:
    cfg, refused = await _guarded(request, writes=False)
    if refused:
        return refused
    run_id = request.path_params["run_id"]
    form = await form_fields(request)
    dataset = str(form.get("dataset") or "")
    fmt = str(form.get("format") or "csv")
    with_status = str(form.get("with_status") or "") in ("1", "on", "true")
    names = await anyio.to_thread.run_sync(cfg.store.datasets, run_id)
    if not dataset and len(names) == 1:  # the run's only dataset need not be named
        dataset = names[0]
    if dataset not in names:
        return _error(
            f"Run {run_id} has no dataset {dataset!r} (its datasets: "
            f"{', '.join(names) or 'none'}).",
            404,
        )
    if fmt not in ("csv", "jsonl"):
        return _error(f"Unknown format {fmt!r}: use csv or jsonl.", 400)
    name = f"{run_id.replace('/', '_')}-{dataset}.{fmt}"
    headers = {"Content-Disposition": _attachment(name)}
    try:  # read once before anything is sent: a file cut short would look whole
        # CSV as `playline export` writes it: columns with fields= as their fields' columns
        columns, rows = await anyio.to_thread.run_sync(
            lambda: export_table(
                cfg.store, run_id, dataset, with_status=with_status, fields=fmt == "csv"
            )
        )
    except PlaylineError as exc:  # e.g. a column named as a status column
        return _error(str(exc), 409)
    if fmt == "jsonl":
        lines = (json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows())
        return StreamingResponse(lines, media_type="application/x-ndjson", headers=headers)
    return StreamingResponse(_csv_lines(rows(), columns), media_type="text/csv", headers=headers)


async def send(request: Request) -> Response:
    cfg, refused = await _guarded(request)
    if refused:
        return refused
    body: Any
    if request.headers.get("content-type", "").startswith("application/json"):
        try:  # NaN and Infinity refused here too: stored, they would become null
            body = json.loads(await request.body(), parse_constant=_no_constant)
        except (ValueError, RecursionError):  # not JSON, or nested past what Python parses
            body = None
    else:
        body = await form_fields(request)
    if not isinstance(body, Mapping):
        return _error(
            'Send a JSON object: {"key": "the event key", "payload": "its JSON text"}.', 400
        )
    named = body.get("key")
    key = named.strip() if isinstance(named, str) else ""
    raw = body.get("payload")
    if not key:
        return _error(
            "Name the event: its key (text), as the run's wait_for_event(key) has it.", 400
        )
    try:  # the payload as JSON text (a form's field); blank text is no payload
        payload = (
            (json.loads(raw, parse_constant=_no_constant) if raw.strip() else None)
            if isinstance(raw, str)
            else raw
        )
    except (ValueError, RecursionError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc) or "nested too deep"
        return _error(f'The payload is not JSON ({why}); write e.g. {{"ok": true}}.', 400)
    try:
        sent = await anyio.to_thread.run_sync(lambda: pl.send_event(key, payload, store=cfg.store))
    except PlaylineError as exc:
        return _error(str(exc), 400)
    message = (
        f"Sent {key!r}: a worker (playline worker) or Resume continues the run."
        if sent
        else f"{key!r} was sent before; the first payload stands."
    )
    return JSONResponse({"key": key, "sent": sent, "message": message})


def _no_constant(name: str) -> Any:
    """NaN and Infinity are no JSON: stored, they would become null."""
    raise ValueError(f"{name} is not a JSON value")


def routes() -> list[Route]:
    return [
        Route("/api/stop/{run_id:path}", stop, methods=["POST"]),
        Route("/api/resume/{run_id:path}", resume, methods=["POST"]),
        Route("/api/export/{run_id:path}", export, methods=["POST"]),
        Route("/api/event", send, methods=["POST"]),
    ]
