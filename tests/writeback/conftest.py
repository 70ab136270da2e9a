"""A real HTTP receiver on a free loopback port for the sink and notification tests.

It keeps every request it gets (``posts``), checks each one's ``Playline-Signature`` when it
has a secret, and answers 200, or what ``answer`` says for a chunk. ``hold`` a chunk number:
the receiver keeps that chunk's first request open (``held`` is set) until ``release`` is,
so a test can kill the sender while its request is out, without sleeping.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from playline.triggers._signing import DELIVERY_HEADER, SIGNATURE_HEADER, BadSignature, verify

SECRET = "sink-secret-for-tests-0123456789"


@dataclass
class Post:
    headers: dict[str, str]
    body: dict[str, Any]
    signed: bool | None  # None: the receiver has no secret


@dataclass
class Receiver:
    url: str = ""
    secret: str | None = None
    posts: list[Post] = field(default_factory=list)
    answer: dict[int, int] = field(default_factory=dict)  # chunk -> status to answer
    hold: int | None = None
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keys(self) -> Counter[str]:
        """Requests per Idempotency-Key."""
        return Counter(p.headers["Idempotency-Key"] for p in self.posts)

    def chunks(self) -> Counter[int]:
        """Requests per chunk number."""
        return Counter(p.body["chunk"] for p in self.posts)

    def delivered(self) -> dict[int, list[dict[str, Any]]]:
        """What a receiver that dedupes by Idempotency-Key applied: each key's first chunk."""
        seen: dict[str, dict[str, Any]] = {}
        for post in self.posts:
            seen.setdefault(post.headers["Idempotency-Key"], post.body)
        return {body["chunk"]: body["rows"] for body in seen.values()}


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            signed = None
            if receiver.secret is not None:
                try:
                    verify(
                        receiver.secret,
                        raw,
                        self.headers.get(SIGNATURE_HEADER),
                        delivery=self.headers.get(DELIVERY_HEADER, ""),
                        now=time.time(),
                    )
                    signed = True
                except BadSignature:
                    signed = False
            body = json.loads(raw)
            with receiver.lock:
                receiver.posts.append(Post(dict(self.headers.items()), body, signed))
                first = sum(p.body.get("chunk") == body.get("chunk") for p in receiver.posts) == 1
            if receiver.hold is not None and body.get("chunk") == receiver.hold and first:
                receiver.held.set()
                receiver.release.wait(60)  # bounds a broken test only
            status = 401 if signed is False else receiver.answer.get(body.get("chunk"), 200)
            try:
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:  # the sender was killed while this request was held
                pass

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver that checks signatures made with ``SECRET``."""
    found = Receiver(secret=SECRET)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(found))
    server.daemon_threads = True
    found.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/leads"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield found
    finally:
        found.release.set()
        server.shutdown()
        server.server_close()
