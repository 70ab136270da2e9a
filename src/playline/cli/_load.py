"""What the command line reads before a run: the play file, its input, its tools.

``PLAY.py[:function]`` is imported as a module (its folder first on ``sys.path``, so it can
import its neighbours); its plays are the ``@pl.play`` objects it defines. Tools are every
``@pl.tool`` the import registered, every module-level ``pl.ToolRegistry``, and the gateway:
``--gateway`` (else ``$PLAYLINE_GATEWAY_URL``) with ``--gateway-token`` (else
``$PLAYLINE_GATEWAY_TOKEN``), checked before a run starts (``connect_gateway``).
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import math
import os
import re
import shlex
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import Play, play, providers
from .._secrets import redact
from ..errors import GatewayError, full_stop
from ..providers import ProviderTools
from ..tools import Gateway, HttpTool, LocalTransport, ToolRegistry, ToolSpec, default_registry

__all__ = [
    "TOKEN_VARIABLE",
    "CliError",
    "LoadedModule",
    "LoadedPlay",
    "connect_gateway",
    "gateway_from",
    "load_module",
    "load_play",
    "parse_inputs",
    "parse_json",
    "read_gateway_token",
    "split_ref",
]


class CliError(Exception):
    """An error the command line reports as one line, exiting with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def cannot_listen(host: str, port: int, error: OSError) -> CliError:
    """A server (the UI, the simulator, webhooks) that cannot listen where it was told, and
    what to change: the host when it is no address of this machine, else the port."""
    if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
        fix = (
            "Check --host: an address of this machine (127.0.0.1, the default; 0.0.0.0 for "
            "every interface) or a name that resolves to one."
        )
    elif error.errno == errno.EACCES and 0 < port < 1024:
        fix = "Ports below 1024 need privileges: choose --port 1024 or above (0: a free one)."
    else:
        fix = "Choose another port with --port (0 picks a free one)."
    return CliError(f"Cannot listen on {host}:{port} ({error.strerror or error}). {fix}", code=1)


@dataclass(frozen=True, kw_only=True)
class LoadedPlay:
    play: Play
    file: Path
    function: str
    module: ModuleType = field(repr=False)
    tools: tuple[ToolSpec, ...] = ()  # the local tools the file defines
    sources: tuple[ToolRegistry, ...] = ()  # where a run finds local tools


_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def _is_module(name: str) -> bool:
    """Whether ``name`` is an importable module's dotted name (``playline.plays``)."""
    try:
        return bool(_MODULE.fullmatch(name)) and importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package that is not there
        return False


def split_ref(ref: str) -> tuple[str, str | None]:
    """``PLAY.py[:function]`` as (the file or module, the function or None)."""
    path, sep, function = ref.rpartition(":")
    if sep and function.isidentifier() and path:
        return path, function
    return ref, None


def _import(file: Path) -> ModuleType:
    name = "playline_play_" + hashlib.sha256(str(file).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise CliError(f"Cannot import {file}: not a Python file. Give a .py file.")
    module = importlib.util.module_from_spec(spec)
    folder = str(file.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        with _interruptible():
            spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise CliError(f"Cannot import {file}: {exc.msg} (line {exc.lineno}).") from None
    except BaseException as exc:  # also sys.exit() or a KeyboardInterrupt the file raises
        if type(exc) is KeyboardInterrupt and not exc.args:
            raise  # what SIGINT raises (a Ctrl-C): the command says it was interrupted
        error = redact(f"{type(exc).__name__}: {exc}")
        raise CliError(
            f"Cannot import {file}: {full_stop(error)} Fix the file and try again."
        ) from None
    return module


@contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT interrupts the block (``KeyboardInterrupt``), also when the command was started
    with it ignored (in the background of a script), as it stops the run that follows
    (``_progress.drive``)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers are the main thread's (tests may run commands elsewhere)
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:  # None: one set outside Python, which cannot be put back
            signal.signal(signal.SIGINT, previous)


@dataclass(frozen=True, kw_only=True)
class LoadedModule:
    file: Path
    module: ModuleType = field(repr=False)
    plays: dict[str, Play]  # attribute name -> play
    tools: tuple[ToolSpec, ...] = ()  # the local tools the file defines
    sources: tuple[ToolRegistry, ...] = ()  # where a run finds local tools


def load_module(path: str) -> LoadedModule:
    """Import a play file (or a module of plays by name: ``playline.plays``); a usage error
    (code 2) when it is missing or does not import."""
    file = Path(path)
    if not file.is_file() and _is_module(path):
        module = importlib.import_module(path)  # kept by name: a resume imports it again
    elif file.is_dir():
        inside = sorted(file.glob("*.py"))
        example = shlex.quote(str(inside[0] if inside else file / "enrich.py"))
        raise CliError(
            f"Play file {path!r} is a folder. Give the path of a .py file in it that defines "
            f"a @pl.play, e.g. `playline run {example}`."
        )
    elif not file.is_file():
        raise CliError(
            f"Play file {path!r} not found. Give the path of a .py file that defines a "
            "@pl.play, e.g. `playline run plays/enrich.py` (or a shipped play: "
            "`playline run playline.plays:work_email`)."
        )
    else:
        file = file.resolve()
        module = _import(file)
    registries = [
        v
        for v in vars(module).values()
        if isinstance(v, ToolRegistry) and v is not default_registry
    ]
    local = [
        s
        for s in default_registry.specs()
        if isinstance(s.transport, LocalTransport)
        and getattr(s.transport.fn, "__module__", None) == module.__name__
    ]
    # pl.HttpTool declarations and providers' tools at the file's top level, then the tools
    # of every provider whose key is set (unless the file chose an account of its own)
    found = [v for v in vars(module).values() if isinstance(v, HttpTool | ProviderTools)]
    chosen = {v.provider.name for v in found if isinstance(v, ProviderTools)}
    found += [t for t in providers.configured() if t.provider.name not in chosen]
    declared = ToolRegistry(s for v in found for s in v.specs())
    if len(declared):
        registries.append(declared)
    for registry in registries:
        local.extend(registry.specs())
    plays = {
        attr: value
        for attr, value in vars(module).items()
        if isinstance(value, Play) and getattr(value.fn, "__module__", None) == module.__name__
    }
    return LoadedModule(
        file=file,
        module=module,
        plays=plays,
        tools=tuple({s.id: s for s in local}.values()),
        sources=(default_registry, *registries),
    )


def load_play(ref: str, *, run_id: str | None = None) -> LoadedPlay:
    """The play ``PLAY.py[:function]`` names; a usage error (code 2) when it cannot be found.
    ``run_id``: the run that recorded ``ref`` (a resume): its file missing is put back, or
    given where it is now with the run's id (a resume takes no path)."""
    path, function = split_ref(ref)
    if run_id is not None and not Path(path).exists() and not _is_module(path):
        where = shlex.quote(f"PATH.py:{function}" if function else "PATH.py")
        raise CliError(
            f"Run {run_id}'s play file {path} is not there any more (moved or deleted?). Put "
            "it back at that path and resume again; or, with the file where it is now, "
            f"`playline run {where} --run-id {shlex.quote(run_id)}` resumes the run (a new "
            "run, without --run-id, gets what this one bought from its receipts)."
        )
    loaded = load_module(path)
    module, plays = loaded.module, loaded.plays
    if function is not None:
        found = getattr(module, function, None)
        if isinstance(found, Play):
            chosen = found
        elif callable(found) and getattr(found, "__module__", None) == module.__name__:
            chosen = play(found)
        else:
            known = ", ".join(sorted(plays)) or "none"
            raise CliError(f"{path} has no play named {function!r} (its plays: {known}).")
    elif len(plays) == 1:
        function, chosen = next(iter(plays.items()))
    elif not plays:
        raise CliError(
            f"{path} defines no play. Decorate an async function with @pl.play, or name one "
            f"with {path}:function."
        )
    else:
        names = ", ".join(sorted(plays))
        raise CliError(
            f"{path} defines several plays ({names}); pick one with {path}:FUNCTION, e.g. "
            f"{path}:{sorted(plays)[0]}."
        )
    return LoadedPlay(
        play=chosen,
        file=loaded.file,
        function=function,
        module=module,
        tools=loaded.tools,
        sources=loaded.sources,
    )


def parse_json(text: str, what: str) -> Any:
    """JSON from ``text``, or from the file ``@path``; a usage error if it does not parse."""
    if text.startswith("@"):
        source = Path(text[1:])
        try:
            text = source.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"{what}: cannot read {source}: {exc.strerror or exc}.") from None
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except ValueError as exc:
        raise CliError(f"{what} is not valid JSON ({exc}).") from None


def _no_constant(name: str) -> Any:
    """Python's json reads NaN and Infinity, which JSON has not: stored, each would reach the
    play as null."""
    raise ValueError(f"{name} is not a JSON number: JSON has no NaN or infinity")


def _finite(text: str) -> float:
    """A JSON number, refused when it is too large for a float (1e400 would be an infinity,
    stored as null)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large a number: the largest is about 1.8e308")
    return value


def parse_inputs(pairs: Sequence[str], input_json: str | None) -> dict[str, Any] | None:
    """The play input from ``--input-json`` and ``-i key=value`` (a string) or ``-i key:=JSON``.

    None when neither is given (a resumed run keeps its stored input)."""
    if input_json is None and not pairs:
        return None
    base: Any = {} if input_json is None else parse_json(input_json, "--input-json")
    if not isinstance(base, dict):
        raise CliError(
            f"--input-json must be a JSON object (got {type(base).__name__}): plays take "
            'a dict, e.g. --input-json \'{"file": "leads.csv"}\'.'
        )
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.rstrip(":").strip():
            raise CliError(
                f"-i {pair!r} is not key=value. Write -i file=leads.csv (a string) or "
                "-i limit:=10 (a JSON value)."
            )
        if key.endswith(":"):
            base[key[:-1].strip()] = parse_json(value, f"-i {pair!r}: the value after :=")
        else:
            base[key.strip()] = value
    return base


TOKEN_VARIABLE = "PLAYLINE_GATEWAY_TOKEN"
TOKEN_OPTION = "--gateway-token"


def read_gateway_token(token: str | None) -> tuple[str, str | None]:
    """The gateway token (``--gateway-token``, else ``$PLAYLINE_GATEWAY_TOKEN``) and where it
    came from: the option's or the variable's name, None when there is none. A run records
    where, never the token: its resume asks for it again."""
    if token:
        return token, TOKEN_OPTION
    value = os.environ.get(TOKEN_VARIABLE, "")
    return value, TOKEN_VARIABLE if value else None


def gateway_from(url: str | None, token: str | None = None) -> Gateway | None:
    """``--gateway`` (else ``PLAYLINE_GATEWAY_URL``) with ``--gateway-token`` (else
    ``PLAYLINE_GATEWAY_TOKEN``); a token given with no gateway is a usage error."""
    url = url or os.environ.get("PLAYLINE_GATEWAY_URL")
    if not url:
        if token:
            raise CliError(
                "--gateway-token goes with a gateway: give --gateway URL (or set "
                "PLAYLINE_GATEWAY_URL)."
            )
        return None
    return Gateway(url, token=read_gateway_token(token)[0])


def connect_gateway(url: str | None, token: str | None, *, doing: str) -> Gateway | None:
    """The gateway, once it has listed its tools and taken the token (``Gateway.check``):
    one that cannot be reached or refuses the token is an error (code 1) that names its
    tools and says what was not done (``doing``: "no run was started"), before anything is
    recorded or paid."""
    gw = gateway_from(url, token)
    if gw is None:
        return None
    specs = gw.specs()  # an unreachable gateway, or a refused tool list, fails here
    try:
        gw.check()
    except GatewayError as exc:
        names = [s.id for s in specs]
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        raise CliError(
            f"{full_stop(str(exc))} None of its tools can be called ({shown or 'none'}): {doing}.",
            code=1,
        ) from None
    return gw
