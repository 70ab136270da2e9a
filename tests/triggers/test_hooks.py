"""Signed webhooks (`pl.hook`, `playline serve`), against the real server on a free port: a
signed delivery queues one run that a worker completes, a retried delivery is a duplicate,
refused requests store nothing, an event hook wakes a waiting run."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import playline as pl
import playline.triggers._signing as signing
from playline.cli import app
from playline.store import Store, open_store
from playline.triggers import sign
from playline.web.hooks import HooksConfig, create_hooks_app
from services import serve_asgi

SECRET = "whsec-test-0123456789abcdef"
SECRET_NAME = "HOOKS_TEST_SECRET"
PLAYLINE = str(Path(sys.executable).with_name("playline"))


@pl.play(name="hooktest-echo")
async def echo(ctx: pl.Context, input: Any) -> Any:
    return {"got": input}


@pl.play(name="hooktest-approval")
async def approval(ctx: pl.Context, input: Any) -> Any:
    return await ctx.wait_for_event(f"approve:{input['deal']}")


SIGNUP = pl.hook("hooktest-signup", play=echo, secret=SECRET_NAME, max_body=1000)
APPROVE = pl.hook("hooktest-approve", event="approve:{deal}", secret=SECRET_NAME)
BY_FUNCTION = pl.hook(
    "hooktest-by-function", event=lambda body: f"approve:{body['deal']}", secret=SECRET_NAME
)


@pytest.fixture
def hooks(durable_store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Store]]:
    """The hooks app on a free loopback port: (base URL, its store)."""
    monkeypatch.setenv(f"PLAYLINE_SECRET_{SECRET_NAME}", SECRET)
    db = open_store(durable_store_url)
    try:
        with serve_asgi(
            create_hooks_app(HooksConfig(store=db, hooks=[SIGNUP, APPROVE, BY_FUNCTION]))
        ) as base:
            yield base, db
    finally:
        db.close()


def post(
    base: str,
    name: str,
    body: Any,
    *,
    delivery: str | None = "d1",
    secret: str = SECRET,
    at: float | None = None,
    headers: dict[str, str] | None = None,
    signed_delivery: str | None = None,
) -> httpx.Response:
    """POST a body to a hook as ``delivery``, signed with ``secret`` at ``at`` (default: now)
    for that delivery (or for ``signed_delivery``, a replay's)."""
    raw = body if isinstance(body, bytes) else httpx.Request("POST", "/", json=body).content
    covered = (delivery or "") if signed_delivery is None else signed_delivery
    signature = sign(secret, raw, timestamp=at or time.time(), delivery=covered)
    sent = {signing.SIGNATURE_HEADER: signature}
    if delivery is not None:
        sent[signing.DELIVERY_HEADER] = delivery
    return httpx.post(f"{base}/hooks/{name}", content=raw, headers={**sent, **(headers or {})})


def burst(db: Store) -> list[pl.RunResult]:
    return asyncio.run(pl.Worker(store=db).run(burst=True))


def test_a_signed_delivery_queues_one_run_a_worker_completes_with_the_body_as_input(
    hooks: tuple[str, Store],
) -> None:
    base, db = hooks
    answer = post(base, "hooktest-signup", {"email": "ada@example.com"}, delivery="evt_1")

    assert answer.status_code == 202, answer.text
    assert answer.json() == {"run_id": "hook:hooktest-signup:evt_1", "duplicate": False}
    queued = db.get_run("hook:hooktest-signup:evt_1")
    assert queued is not None and queued.status == "suspended"
    assert queued.options["origin"] == {
        "kind": "hook",
        "name": "hooktest-signup",
        "delivery": "evt_1",
    }
    assert queued.options["source"] == {"file": __file__, "function": "echo"}

    [result] = burst(db)  # no play code ran in the request: the worker runs it
    assert (result.run_id, result.status) == ("hook:hooktest-signup:evt_1", "completed")
    assert result.output == {"got": {"email": "ada@example.com"}}


@pytest.mark.parametrize(("body", "kind"), [([1, 2], "list"), ("hi", "string"), (b"null", "null")])
def test_a_body_that_is_no_object_queues_no_run(
    hooks: tuple[str, Store], body: Any, kind: str
) -> None:
    """A play's input is an object (as on the command line): a list was queued, and the
    worker then failed the run with "AttributeError: 'list' object has no attribute 'get'"."""
    base, db = hooks
    answer = post(base, "hooktest-signup", body, delivery=f"evt_{kind}")

    assert answer.status_code == 400
    assert (
        f"must be a JSON object (it becomes the play's input), not a {kind}"
        in (answer.json()["error"])
    )
    assert db.list_runs() == []


def test_the_same_delivery_twice_starts_one_run(hooks: tuple[str, Store]) -> None:
    base, db = hooks
    first = post(base, "hooktest-signup", {"email": "ada@example.com"}, delivery="evt_2")
    again = post(base, "hooktest-signup", {"email": "ada@example.com"}, delivery="evt_2")

    assert first.json() == {"run_id": "hook:hooktest-signup:evt_2", "duplicate": False}
    assert again.status_code == 202
    assert again.json() == {"run_id": "hook:hooktest-signup:evt_2", "duplicate": True}
    assert [r.run_id for r in db.list_runs()] == ["hook:hooktest-signup:evt_2"]
    assert [r.status for r in burst(db)] == ["completed"]


def test_a_delivery_id_that_is_no_plain_name_is_hashed_into_the_run_id(
    hooks: tuple[str, Store],
) -> None:
    base, _ = hooks
    answer = post(base, "hooktest-signup", {"n": 1}, delivery="a/b c")
    assert re.fullmatch(r"hook:hooktest-signup:sha256-[0-9a-f]{32}", answer.json()["run_id"])


def _chunks(size: int) -> Iterator[bytes]:
    yield b'{"pad": "'
    for _ in range(size // 100):
        yield b"x" * 100
    yield b'"}'


REFUSED = {  # what is sent -> the status it is answered
    "a wrong signature": (dict(secret="not-the-secret"), 401),
    # past the 300 s tolerance by more than the second a signed timestamp is rounded down by
    # and the time the request takes on a busy machine (301 s ahead was let in: 300.4 s)
    "a timestamp 330 s old": (dict(at_offset=-330), 401),
    "a timestamp 330 s ahead": (dict(at_offset=330), 401),
    "no signature": (dict(headers={signing.SIGNATURE_HEADER: ""}), 401),
    "a body over max_body": (dict(body=b'{"pad": "' + b"x" * 1000 + b'"}'), 413),
    "a chunked body over max_body": (dict(chunked=True), 413),
    "a body that is not JSON": (dict(body=b"email=ada@example.com"), 400),
    "no delivery id": (dict(delivery=None), 400),
}


def _stored(db: Store, url: str) -> Any:
    """What the store holds: its runs, and on SQLite the rows of every table."""
    runs = [r.run_id for r in db.list_runs()]
    if not url.startswith("sqlite:///"):
        return runs
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return runs, {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone() for t in tables}


@pytest.mark.parametrize("case", REFUSED)
def test_a_refused_delivery_starts_nothing_and_stores_nothing(
    case: str, hooks: tuple[str, Store], durable_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    base, db = hooks
    given, status = REFUSED[case]
    before = _stored(db, durable_store_url)
    if given.get("chunked"):
        request = httpx.Request("POST", f"{base}/hooks/hooktest-signup", content=_chunks(1200))
        assert "content-length" not in request.headers  # sent in chunks, its size unsaid
        answer = httpx.Client().send(request)
    else:
        at = time.time() + given["at_offset"] if "at_offset" in given else None
        options = {k: v for k, v in given.items() if k in ("secret", "headers", "delivery")}
        answer = post(base, "hooktest-signup", given.get("body", {"n": 1}), at=at, **options)

    assert answer.status_code == status, answer.text
    if status == 401:  # the sender learns nothing more; the server's log says why
        assert answer.json() == {"error": "invalid signature"}
        assert any("hooktest-signup: refused" in r.getMessage() for r in caplog.records)
    assert _stored(db, durable_store_url) == before
    assert burst(db) == []


def test_a_refused_event_delivery_sends_no_event(hooks: tuple[str, Store]) -> None:
    base, db = hooks
    bad = post(base, "hooktest-approve", {"deal": "d9"}, secret="not-the-secret")
    old = post(base, "hooktest-approve", {"deal": "d9"}, at=time.time() - 600)
    no_key = post(base, "hooktest-approve", {"other": "d9"})
    an_object = post(base, "hooktest-approve", {"deal": {"id": "d9"}})
    null = post(base, "hooktest-approve", {"deal": None})

    assert [bad.status_code, old.status_code, no_key.status_code] == [401, 401, 400]
    assert "no 'deal' field" in no_key.json()["error"]
    # its Python form ("approve:{'id': 'd9'}") was the event key
    assert an_object.status_code == 400 and "'deal' field is an object" in an_object.json()["error"]
    assert null.status_code == 400 and "'deal' field is null" in null.json()["error"]  # not "no"
    assert db.waiting_events(["approve:d9"]) == set()
    assert pl.send_event("approve:d9", {}, store=db) is True  # the first of that key


def test_an_event_hook_resumes_a_run_waiting_for_its_event(hooks: tuple[str, Store]) -> None:
    base, db = hooks
    waiting = pl.run(approval, {"deal": "d7"}, store=db)
    assert waiting.status == "suspended"

    sent = post(base, "hooktest-approve", {"deal": "d7", "ok": True}, delivery=None)
    again = post(base, "hooktest-approve", {"deal": "d7", "ok": False}, delivery=None)

    assert sent.status_code == 202 and sent.json() == {"event": "approve:d7", "duplicate": False}
    assert again.json() == {"event": "approve:d7", "duplicate": True}
    [result] = burst(db)
    assert (result.run_id, result.status) == (waiting.run_id, "completed")
    assert result.output == {"deal": "d7", "ok": True}  # the first payload stands


def test_an_event_key_function_makes_the_key_or_the_delivery_is_refused(
    hooks: tuple[str, Store],
) -> None:
    base, db = hooks
    failed = post(base, "hooktest-by-function", {"other": 1})
    with_nul = post(base, "hooktest-by-function", {"deal": "a\x00b"})
    sent = post(base, "hooktest-by-function", {"deal": "d8"})

    assert failed.status_code == 400 and "KeyError: 'deal'" in failed.json()["error"]
    assert with_nul.status_code == 400 and "NUL" in with_nul.json()["error"]
    assert sent.json() == {"event": "approve:d8", "duplicate": False}
    assert db.waiting_events(["approve:d8"]) == {"approve:d8"}


def test_only_post_reaches_a_hook_and_health_is_answered(hooks: tuple[str, Store]) -> None:
    base, _ = hooks
    assert httpx.get(f"{base}/hooks/hooktest-signup").status_code == 405
    health = httpx.get(f"{base}/healthz")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "hooks": 3}  # how many, not which


def test_an_unknown_hook_names_no_other_hook_to_the_sender_only_to_the_log(
    hooks: tuple[str, Store], caplog: pytest.LogCaptureFixture
) -> None:
    base, db = hooks
    answer = post(base, "zzz", {"n": 1})

    assert answer.status_code == 404
    assert answer.json() == {"error": "No such hook."}
    assert "hooktest" not in answer.text
    [logged] = [r.getMessage() for r in caplog.records if "'zzz'" in r.getMessage()]
    assert "hooktest-approve, hooktest-by-function, hooktest-signup" in logged
    assert db.list_runs() == []


def test_a_request_signed_with_the_documented_openssl_recipe_is_accepted(
    hooks: tuple[str, Store],
) -> None:
    base, db = hooks
    doc = signing.__doc__ or ""
    recipe = doc.split("To sign a test request by hand::")[1].strip()
    recipe = recipe.replace("curl ", "curl -s ").replace(" URL", f" {base}/hooks/hooktest-signup")
    done = subprocess.run(
        ["bash", "-c", recipe],
        capture_output=True,
        text=True,
        env={**os.environ, "SECRET": SECRET},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"run_id":"hook:hooktest-signup:1","duplicate":false}'
    [result] = burst(db)
    assert result.output == {"got": {"email": "ada@example.com"}}


def test_a_signed_request_replayed_under_another_delivery_id_starts_no_run(
    hooks: tuple[str, Store], caplog: pytest.LogCaptureFixture
) -> None:
    """The signature covers the delivery id: a captured request sent again as it was is its
    delivery's duplicate, and sent again under a new id (a new run, each time) is refused."""
    base, db = hooks
    at = time.time()
    body = {"email": "ada@example.com"}
    first = post(base, "hooktest-signup", body, delivery="evt_r1", at=at)
    same = post(base, "hooktest-signup", body, delivery="evt_r1", at=at)
    replays = [
        post(base, "hooktest-signup", body, delivery=d, at=at, signed_delivery="evt_r1")
        for d in ("evt_r2", "evt_r3")
    ]

    assert first.json() == {"run_id": "hook:hooktest-signup:evt_r1", "duplicate": False}
    assert same.json() == {"run_id": "hook:hooktest-signup:evt_r1", "duplicate": True}
    assert [r.status_code for r in replays] == [401, 401]
    assert replays[0].json() == {"error": "invalid signature"}
    assert [r.run_id for r in db.list_runs()] == ["hook:hooktest-signup:evt_r1"]
    logged = [r.getMessage() for r in caplog.records]
    assert any("not match the body and the Playline-Delivery id 'evt_r2'" in m for m in logged)


def test_a_sender_signing_the_body_alone_is_refused_and_the_log_says_how_to_sign(
    hooks: tuple[str, Store], caplog: pytest.LogCaptureFixture
) -> None:
    base, db = hooks
    raw = b'{"n": 1}'
    t = int(time.time())
    old = hmac.new(SECRET.encode(), f"{t}.".encode() + raw, hashlib.sha256).hexdigest()
    answer = httpx.post(
        f"{base}/hooks/hooktest-signup",
        content=raw,
        headers={signing.SIGNATURE_HEADER: f"t={t},v1={old}", signing.DELIVERY_HEADER: "d1"},
    )

    assert answer.status_code == 401 and answer.json() == {"error": "invalid signature"}
    assert any("signs the old way" in r.getMessage() for r in caplog.records)
    assert db.list_runs() == []


_HEADER_TEXT = st.characters(max_codepoint=255, exclude_characters="\r\n")  # as HTTP sends


@settings(max_examples=200, deadline=None)
@given(
    first=st.tuples(st.text(alphabet=_HEADER_TEXT), st.binary()),
    second=st.tuples(st.text(alphabet=_HEADER_TEXT), st.binary()),
)
def test_two_deliveries_share_a_signature_only_when_their_id_and_body_are_the_same(
    first: tuple[str, bytes], second: tuple[str, bytes]
) -> None:
    """No part of the body can move into the delivery id or back under one signature."""
    a = sign(SECRET, first[1], timestamp=1_767_600_000, delivery=first[0])
    b = sign(SECRET, second[1], timestamp=1_767_600_000, delivery=second[0])
    same = (first[0].strip(" \t"), first[1]) == (second[0].strip(" \t"), second[1])
    assert (a == b) == same


def test_a_body_cannot_lend_its_end_to_the_delivery_id() -> None:
    """The split "<id>.<body>" would allow: id 'x', body 5.5 signed as id 'x.5', body 5."""
    t = 1_767_600_000
    signed = sign(SECRET, b"5.5", timestamp=t, delivery="x")
    with pytest.raises(signing.BadSignature):
        signing.verify(SECRET, b"5", signed, delivery="x.5", now=t)
    assert signing.verify(SECRET, b"5.5", signed, delivery="x", now=t) == t


def test_a_timestamp_in_digits_other_than_ascii_is_refused_as_malformed() -> None:
    with pytest.raises(signing.BadSignature, match="must be 't=<unix seconds>"):
        signing.verify(SECRET, b"{}", "t=\u00b2,v1=00", delivery="", now=time.time())


def test_a_new_run_cannot_take_a_hook_s_run_id_and_a_hook_s_run_resumes_by_it(
    hooks: tuple[str, Store],
) -> None:
    base, db = hooks
    with pytest.raises(pl.PlayDefinitionError, match="ids starting with 'hook:'"):
        pl.run(echo, {"email": "mallory@example.com"}, store=db, run_id="hook:hooktest-signup:zz")
    queued = post(base, "hooktest-signup", {"email": "ada@example.com"}, delivery="zz")

    assert queued.json() == {"run_id": "hook:hooktest-signup:zz", "duplicate": False}
    resumed = pl.run(echo, store=db, run_id="hook:hooktest-signup:zz")  # `playline resume`
    assert (resumed.status, resumed.output) == ("completed", {"got": {"email": "ada@example.com"}})


def test_every_run_id_a_trigger_makes_starts_with_a_reserved_prefix() -> None:
    from playline._run_id import RESERVED_PREFIXES, check_new_run_id
    from playline.triggers import schedule_run_id

    made = [SIGNUP.run_id("evt_1"), SIGNUP.run_id("a/b c"), schedule_run_id("weekly", 0.0)]
    for run_id in made:
        assert run_id.startswith(RESERVED_PREFIXES), run_id
        with pytest.raises(pl.PlayDefinitionError, match="cannot name a new run"):
            check_new_run_id(run_id)
    temporal = pytest.importorskip("playline.backends._temporal._schedules")
    assert temporal.RUN_PREFIX in RESERVED_PREFIXES


# declaring hooks


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        (dict(play=echo, event="x:{a}"), "not both"),
        (dict(), "not neither"),
        (dict(play=echo, secret="whsec_9f86d081884c7d659a2feaa0c55ad015"), "never the secret"),
        (dict(play=echo, secret="my secret"), "NAME of the environment variable"),
        (dict(play=echo, max_body=0), "max_body=0"),
        (dict(play=echo, max_body=True), "max_body=True"),
        (dict(play=echo, tolerance=-1), "tolerance=-1"),
        (dict(event="signup"), "a key without fields"),
        (dict(event="signup:{}"), "no positions"),
        (dict(event="signup:{user.email}"), "no positions, attributes"),
        (dict(event="signup:{email"), "not a valid template"),
        (dict(event=42), "a function (payload)"),
        (dict(event=lambda: "k"), "(payload) -> event key"),
        (dict(play=lambda ctx, input: None), "a @pl.play or an async function"),
    ],
)
def test_a_hook_declared_wrong_is_refused_saying_what_to_do(kwargs: Any, says: str) -> None:
    arguments = {"secret": SECRET_NAME, **kwargs}
    with pytest.raises(pl.PlayDefinitionError, match=re.escape(says)):
        pl.hook("hooktest-wrong", **arguments)


def test_a_hook_name_must_fit_in_its_url() -> None:
    with pytest.raises(pl.PlayDefinitionError, match="last part of its URL"):
        pl.hook("sign/up", play=echo, secret=SECRET_NAME)


def test_another_module_cannot_take_a_hook_name() -> None:
    code = "import playline as pl\npl.hook('hooktest-signup', event='e:{a}', secret='X')\n"
    with pytest.raises(pl.PlayDefinitionError, match=r"declared in .*test_hooks already"):
        exec(compile(code, "other.py", "exec"), {"__name__": "other_module"})


def test_a_hook_without_its_secret_is_not_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(f"PLAYLINE_SECRET_{SECRET_NAME}", raising=False)
    monkeypatch.delenv(SECRET_NAME, raising=False)
    with pytest.raises(pl.PlayDefinitionError, match=f"PLAYLINE_SECRET_{SECRET_NAME}"):
        create_hooks_app(HooksConfig(store=open_store("memory://hooks"), hooks=[SIGNUP]))


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {f"PLAYLINE_SECRET_{SECRET_NAME}": ""},
            f"secret PLAYLINE_SECRET_{SECRET_NAME} is set but empty",
        ),
        ({SECRET_NAME: " \t "}, f"secret {SECRET_NAME} is set but empty"),
        (  # the prefixed one is read first, so it is the one named
            {f"PLAYLINE_SECRET_{SECRET_NAME}": "", SECRET_NAME: SECRET},
            f"secret PLAYLINE_SECRET_{SECRET_NAME} is set but empty",
        ),
        ({SECRET_NAME: "ab"}, f"secret {SECRET_NAME} is 2 character(s) long; give at least 16"),
        ({SECRET_NAME: "x" * 15}, "is 15 character(s) long"),
    ],
)
def test_a_hook_with_an_empty_or_short_secret_is_not_served(
    env: dict[str, str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anyone can sign with an empty key and guess a short one."""
    monkeypatch.delenv(f"PLAYLINE_SECRET_{SECRET_NAME}", raising=False)
    monkeypatch.delenv(SECRET_NAME, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(pl.PlayDefinitionError) as refused:
        create_hooks_app(HooksConfig(store=open_store("memory://hooks"), hooks=[SIGNUP]))
    assert says in str(refused.value)
    assert "secrets.token_hex(32)" in str(refused.value)


def test_a_hook_secret_of_16_characters_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(f"PLAYLINE_SECRET_{SECRET_NAME}", raising=False)
    monkeypatch.setenv(SECRET_NAME, "x" * 16)
    create_hooks_app(HooksConfig(store=open_store("memory://hooks"), hooks=[SIGNUP]))


# playline serve

SERVED = """
import playline as pl

@pl.play
async def enrich_lead(ctx, input):
    return {"lead": input["email"].upper()}

pl.hook("crm-signup", play=enrich_lead, secret="CRM_HOOK_SECRET")
"""


def test_serve_refuses_to_start_without_a_hook_secret(tmp_path: Path) -> None:
    (tmp_path / "hooks.py").write_text(SERVED, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if "CRM_HOOK_SECRET" not in k}
    done = CliRunner().invoke(
        app, ["serve", str(tmp_path / "hooks.py"), "--store", f"sqlite:///{tmp_path}/s.db"], env=env
    )
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith("error: Hook 'crm-signup' needs its signing secret")
    assert "PLAYLINE_SECRET_CRM_HOOK_SECRET" in done.stderr


def test_serve_refuses_to_start_with_an_empty_hook_secret(tmp_path: Path) -> None:
    served = SERVED.replace("crm-signup", "crm-empty")  # another module declares crm-signup
    (tmp_path / "hooks.py").write_text(served, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if "CRM_HOOK_SECRET" not in k}
    done = CliRunner().invoke(
        app,
        ["serve", str(tmp_path / "hooks.py"), "--store", f"sqlite:///{tmp_path}/s.db"],
        env={**env, "CRM_HOOK_SECRET": ""},
    )
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith(
        "error: Hook 'crm-empty': its signing secret CRM_HOOK_SECRET is set but empty"
    )
    assert "Playline hooks on" not in done.stderr


def test_serve_refuses_files_that_declare_no_hook(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("import playline as pl\n", encoding="utf-8")
    done = CliRunner().invoke(app, ["serve", str(tmp_path / "plain.py")])
    assert done.exit_code == 2, done.output
    assert "No hook to serve" in done.stderr


def test_playline_serve_answers_a_delivery_and_its_worker_completes_the_run(
    tmp_path: Path,
) -> None:
    (tmp_path / "hooks.py").write_text(SERVED, encoding="utf-8")
    store = f"sqlite:///{tmp_path}/serve.db"
    proc = subprocess.Popen(
        [PLAYLINE, "serve", "hooks.py", "--port", "0", "--store", store],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CRM_HOOK_SECRET": SECRET, "COLUMNS": "200"},
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        found = re.search(r"Playline hooks on (http://127\.0\.0\.1:\d+)", first)
        assert found, first + proc.stderr.read()
        listed = proc.stderr.readline()
        assert f"POST {found[1]}/hooks/crm-signup  starts play enrich-lead" in listed

        answer = post(found[1], "crm-signup", {"email": "ada@example.com"}, delivery="evt_9")
        assert answer.json() == {"run_id": "hook:crm-signup:evt_9", "duplicate": False}
        with open_store(store) as db:  # the serve's own worker starts it
            deadline = time.monotonic() + 60  # bounds a broken test only
            while (run := db.get_run("hook:crm-signup:evt_9")) and run.status != "completed":
                assert time.monotonic() < deadline and proc.poll() is None, run
                time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "hook crm-signup: delivery evt_9 queued run hook:crm-signup:evt_9" in err
    assert "run hook:crm-signup:evt_9 completed" in err
    assert err.rstrip().endswith("Stopped.")


def test_an_event_key_from_a_boolean_field_reads_as_json(hooks: tuple[str, Store]) -> None:
    """{"deal": true} made the key 'approve:True', Python's spelling."""
    base, db = hooks
    sent = post(base, "hooktest-approve", {"deal": True})
    assert sent.status_code in (200, 202), sent.text
    assert db.waiting_events(["approve:true", "approve:True"]) == {"approve:true"}


def test_the_log_shows_a_long_delivery_id_cut_short(
    hooks: tuple[str, Store], caplog: pytest.LogCaptureFixture
) -> None:
    """A 5,000-character delivery id was logged whole, each time."""
    base, _ = hooks
    caplog.set_level(logging.INFO, logger="playline.hooks")
    sent = post(base, "hooktest-signup", {"email": "a@x.com"}, delivery="d" * 5000)
    assert sent.status_code == 202, sent.text
    (line,) = [r.getMessage() for r in caplog.records if "queued run" in r.getMessage()]
    assert f"delivery {'d' * 77}... queued run hook:hooktest-signup:sha256-" in line
