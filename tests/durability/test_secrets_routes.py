"""SEMANTICS 15, tried as an attacker would: every route a secret could take out of a play.

Hypothesis draws secrets of every character class (quotes, backslashes, tabs and other control
characters, non-ASCII letters, short and long ones). For each, one ``playline run --json
--out`` runs a play that tries every route at once: a tool echoing the secret into its result,
the secret (or a slice, upper-cased or base64 form of it) as a cell value, in a row key, in a
cell's exception and ``ctx.log``; child plays put it in a dataset name, an event key, a step
key, a child's key, a step's result, a log line, an exception and their output; the root play
ends by one of those drawn by hypothesis. Another process then reads everything back (exports
in every format, ``show --json``, ``logs``, ``runs --json``). A byte scan of the database and
its -wal/-shm files, every export, and every stdout and stderr finds neither the secret nor a
derived form (for secrets long enough to have them: see ``playline._secrets``), and every run
ended in a true status.
"""

from __future__ import annotations

import base64
import json
import os
import string
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from playline._secrets import DERIVED_FROM

PLAY = r'''
import base64

import playline as pl

ROW_ROUTES = (
    "plain", "tool_echo", "value", "nested", "cell_error", "cell_log", "slice", "upper",
    "base64", "row_key",
)
CHILD_ROUTES = (
    "dataset_name", "event_key", "step_key", "child_key", "step_result", "log", "raise",
    "output",
)


@pl.tool("leak.echo", batch=pl.Batch(max_size=100))
def echo(inputs):
    return [{"echo": i["key"] if i["route"] == "tool_echo" else "-"} for i in inputs]


def derived(s):
    return {
        "slice": s[:-1],
        "upper": s.upper(),
        "base64": base64.b64encode(s.encode("utf-8", "surrogatepass")).decode(),
    }


def cell(row, ctx, s):
    route = row["route"]
    if route == "value":
        return s
    if route == "nested":
        return {"deep": [{"key": s}]}
    if route == "cell_error":
        raise ValueError(f"the provider refused {s} ({s.upper()})")
    if route == "cell_log":
        ctx.log(f"row {row['id']} uses {s}")
    if route in ("slice", "upper", "base64"):
        return derived(s)[route]
    return "ok"


async def attempt(ctx, route, s):
    """Play-level routes: each one leaks at the play level, or raises trying."""
    if route == "dataset_name":
        return await ctx.dataset(f"leads-{s}", [{"a": 1}]).run()
    if route == "event_key":
        return await ctx.wait_for_event(f"reply:{s}")
    if route == "step_key":
        return await ctx.step(f"fetch-{s}", lambda: 1)
    if route == "child_key":
        return await ctx.run_play(f"child-{s}", plain, {})
    if route == "step_result":
        return await ctx.step("result", lambda: {"token": s})
    if route == "log":
        ctx.log(f"the key is {s}; {derived(s)['slice']}")
        return 1
    if route == "raise":
        raise RuntimeError(f"the provider said {s} / {derived(s)['upper']}")
    if route == "output":
        return {"key": s, "derived": derived(s)}
    raise AssertionError(route)


@pl.play(name="leak-plain")
async def plain(ctx, input):
    return 1


@pl.play(name="leak-child")
async def child(ctx, input):
    return await attempt(ctx, input["route"], ctx.secrets.get("LEAK").reveal())


@pl.play(name="leak")
async def leak(ctx, input):
    key = ctx.secrets.get("LEAK")
    s = key.reveal()
    rows = [{"id": i, "route": route} for i, route in enumerate(ROW_ROUTES)]
    dataset = await (
        ctx.dataset(
            "leads",
            rows,
            key=lambda row: f"{row['id']}-{s}" if row["route"] == "row_key" else str(row["id"]),
        )
        .with_column(
            "echo", lambda row, ctx: ctx.tool("leak.echo", {"route": row["route"], "key": key})
        )
        .with_column("value", lambda row, ctx: cell(row, ctx, s))
        .run()
    )
    for route in CHILD_ROUTES:
        try:
            await ctx.run_play(f"route-{route}", child, {"route": route})
        except Exception:
            pass  # refused: the child's run says how
    if input["ending"] == "dataset":
        return dataset
    return await attempt(ctx, input["ending"], s)
'''

ENDINGS = ("dataset", "output", "raise", "log", "event_key", "dataset_name", "step_result")

# The reads made afterwards, by a process that never read the secret.
READER = r"""
import json, sys
from playline.cli import app

def cli(*args):
    print(f"=== {' '.join(args)}", flush=True)
    print(f"=== {' '.join(args)}", file=sys.stderr, flush=True)
    try:
        app(list(args), standalone_mode=False)
    except SystemExit:
        pass
    except Exception as exc:  # a usage error: say it as the command line would
        print(f"error: {exc}", file=sys.stderr, flush=True)

folder, run_id = sys.argv[1], sys.argv[2]
cli("export", run_id, "--dataset", "leads", "--out", f"{folder}/status.csv", "--with-status")
cli("export", run_id, "--dataset", "leads", "--out", f"{folder}/status.jsonl", "--with-status")
cli("export", run_id, "--dataset", "leads", "--out", f"{folder}/raw.csv", "--raw")
cli("logs", run_id)
cli("logs", run_id, "--json")
cli("runs", "--json", "--limit", "100")
cli("runs", "--limit", "100")
cli("show", run_id)
cli("show", run_id, "--json")
"""

ROOT_SECRET = "Rf7#Q2x9-kLm.pW3"  # for the corpus of what a run writes of itself


def _cli(folder: Path, secret: str, ending: str) -> tuple[list[str], dict[str, str]]:
    exe = str(Path(sys.executable).with_name("playline"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PLAYLINE_")},
        "PLAYLINE_SECRET_LEAK": secret,
        "COLUMNS": "200",
    }
    argv = [
        exe,
        "run",
        str(folder / "play.py:leak"),
        "-i",
        f"ending={ending}",
        "--json",
        "--out",
        str(folder / "out.csv"),
        "--store",
        f"sqlite:///{folder}/store.db",
    ]
    return argv, env


def _scenario(folder: Path, secret: str, ending: str) -> tuple[dict[str, bytes], list[str]]:
    """Run the play, then read everything back; the files and outputs, and the runs' statuses."""
    (folder / "play.py").write_text(PLAY, encoding="utf-8")
    argv, env = _cli(folder, secret, ending)
    run = subprocess.run(argv, capture_output=True, env=env, timeout=60, cwd=folder)
    said = f"exit {run.returncode}: {run.stderr.decode(errors='replace')}"
    assert run.returncode in (0, 1), said
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    run_id = next((line["run_id"] for line in lines if line.get("run_id")), None)
    assert run_id is not None, said
    read_env = {k: v for k, v in env.items() if k != "PLAYLINE_SECRET_LEAK"}
    read_env["PLAYLINE_STORE"] = f"sqlite:///{folder}/store.db"
    reader = subprocess.run(
        [sys.executable, "-c", READER, str(folder), run_id],
        capture_output=True,
        env=read_env,
        timeout=60,
        cwd=folder,
    )
    assert reader.returncode == 0, reader.stderr.decode(errors="replace")
    outputs = {
        "run stdout": run.stdout,
        "run stderr": run.stderr,
        "reader stdout": reader.stdout,
        "reader stderr": reader.stderr,
    }
    for path in folder.iterdir():
        if path.name != "play.py" and path.is_file():
            outputs[path.name] = path.read_bytes()
    statuses = _statuses(reader.stdout)
    return outputs, statuses


def _statuses(reader_stdout: bytes) -> list[str]:
    text = reader_stdout.decode()
    section = text.split("=== runs --json --limit 100\n", 1)[1].split("\n=== ", 1)[0]
    return [json.loads(line)["status"] for line in section.splitlines() if line.strip()]


def _targets(secret: str) -> dict[str, str]:
    """What must not be found: the secret and, where the rule covers them, its derived forms."""
    targets = {"the secret": secret}
    if len(secret) >= 16:
        targets["s[:-1]"] = secret[:-1]
        targets["s.upper()"] = secret.upper()
        targets["base64(s)"] = base64.b64encode(secret.encode("utf-8", "surrogatepass")).decode()
    return targets


def _encodings(text: str) -> Iterator[tuple[str, bytes]]:
    """``text`` as each writer Playline uses would write it."""
    yield "as is", text.encode("utf-8", "surrogatepass")
    yield "in JSON", json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
    yield "in ASCII JSON", json.dumps(text)[1:-1].encode()
    yield "in CSV", text.replace('"', '""').encode("utf-8", "surrogatepass")


def _leaks(outputs: dict[str, bytes], secret: str) -> list[str]:
    found = []
    for what, target in _targets(secret).items():
        for how, needle in _encodings(target):
            found.extend(
                f"{what} {how} in {where}" for where, data in outputs.items() if needle in data
            )
    return found


class Corpus(bytes):
    """Everything a run of the scenario writes that is not the secret, lower-cased: a drawn
    secret found in it would be found by accident (a column name, a word of a message)."""

    def __repr__(self) -> str:
        return f"Corpus({len(self)} bytes)"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    folder = tmp_path_factory.mktemp("corpus")
    outputs, _ = _scenario(folder, ROOT_SECRET, "raise")
    return Corpus(b"\n".join(outputs.values()).lower() + PLAY.encode().lower())


_SPECIAL = "\"\\'\t\n\r\x01\x1b\x1f\x7f =,;@+-"
_characters = st.one_of(
    st.sampled_from(_SPECIAL),
    st.characters(min_codepoint=0x21, max_codepoint=0x7E),
    st.characters(min_codepoint=0x80, blacklist_categories=("Cs",)),
)
secrets_ = st.one_of(
    st.text(_characters, min_size=4, max_size=15),  # short: caught as they are
    st.text(_characters, min_size=16, max_size=80),  # long: also in derived forms
)


def _by_accident(secret: str, corpus: bytes) -> bool:
    """Whether ``secret`` would be found in any run's output without leaking: in the corpus, or
    made only of characters that run ids, digests and times are made of."""
    if all(c in string.hexdigits + ".-_: \t\n\r" for c in secret):
        return True
    if len(secret) < DERIVED_FROM and secret[-1] in "\r\n,\"'}]":
        # its slice s[:-1] may be stored (a short secret's derived forms are not caught, as
        # documented), and a file's own next character (a CSV line's CRLF) completes it
        return True
    return any(needle.lower() in corpus for _, needle in _encodings(secret))


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(secret=secrets_, ending=st.sampled_from(ENDINGS))
@example(secret='sk"live\\9f8e7d6c', ending="dataset")  # the issue's: a quote and a backslash
@example(secret='sk"live\\9f8e7d6c\tZq"', ending="raise")  # long: derived forms too
@example(secret="tab\there\x01ctl\x1f\u00e9\u00e8Q", ending="log")  # control characters
@example(secret="\u00df" * 17, ending="output")  # upper() doubles its length
@example(secret="\u0130\u0131\u00ffZq\U0001f511\u00e9" * 3, ending="event_key")
@example(secret='=HYPERLINK("x")', ending="dataset_name")
def test_no_route_leaks_a_secret(tmp_path: Path, corpus: Corpus, secret: str, ending: str) -> None:
    assume(not _by_accident(secret, corpus))
    folder = Path(tempfile.mkdtemp(dir=tmp_path))

    outputs, statuses = _scenario(folder, secret, ending)

    leaked = _leaks(outputs, secret)
    assert not leaked, leaked
    assert statuses, "the reader listed no runs"
    assert set(statuses) <= {"completed", "completed_with_errors", "failed"}, statuses
    root_run = outputs["run stdout"].splitlines()[-1]
    assert json.loads(root_run)["status"] != "running"


def test_the_scan_finds_what_a_play_is_allowed_to_reveal(tmp_path: Path) -> None:
    """The oracle itself: a tool that writes what it is given to a file is outside Playline's
    reach (a play is code), and the scan sees it there."""
    secret = 'Zq"long\\secret\tvalue-123'
    outputs = {"file": json.dumps({"k": secret}).encode()}
    assert _leaks(outputs, secret)
    assert _leaks({"csv": b'"Zq""long\\secret\tvalue-12"'}, secret)  # s[:-1], CSV-quoted
