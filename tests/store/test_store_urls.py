"""``display_url``: a store URL as Playline shows it, without the password it may hold, also
when the URL is refused."""

from __future__ import annotations

import pytest

from playline.errors import StoreError
from playline.store import display_url, open_store


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://rw:PW@127.0.0.1:5432/db", "postgresql://rw@127.0.0.1:5432/db"),
        ("postgres://rw:PW@db/leads", "postgres://rw@db/leads"),
        ("postgresql://:PW@db/leads", "postgresql://db/leads"),
        ("postgresql://rw@db/leads", "postgresql://rw@db/leads"),
        # libpq's parameters may hold a password: only Playline's own options are shown
        (
            "postgresql://rw@db/leads?password=PW&sslmode=require&pool_size=8",
            "postgresql://rw@db/leads?pool_size=8",
        ),
        ("postgresql://rw@db/leads?sslpassword=PW", "postgresql://rw@db/leads"),
        ("postgresql:///leads?host=/run/pg&password=PW", "postgresql:///leads"),
        # passwords with characters that should have been escaped
        ("postgresql://rw:P@W@[::1]:5432/db", "postgresql://rw@[::1]:5432/db"),
        ("postgresql://rw:P?W#X@db/leads", "postgresql://rw@db/leads"),
        ("postgresql://rw:P/W@db/leads", "postgresql://rw@db/leads"),
        ("postgresql://rw:P?W/X@db/leads", "postgresql://rw"),
        ("postgresql://h1:5432,h2:5433/leads", "postgresql://h1:5432,h2:5433/leads"),
        ("postgresql://db/leads?application_name=me@home", "postgresql://db/leads"),
        # the other stores hold no credentials: shown as they are
        ("sqlite:///runs/p@w.db?busy_timeout=5", "sqlite:///runs/p@w.db?busy_timeout=5"),
        ("memory://Shared", "memory://Shared"),
        ("memory://", "memory://"),
    ],
)
def test_display_url_shows_no_password(url: str, shown: str) -> None:
    assert display_url(url) == shown
    assert "PW" not in display_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://rw:PW%@db/leads",  # libpq quotes the token it cannot decode
        "postgresql://rw:PW/x@db/leads",  # its port, to Python, would be "PW"
        "postgresq://rw:PW@db/leads",  # an unknown scheme
        "postgresql://rw:PW@db/leads?pool_size=none",
    ],
)
def test_a_refused_url_is_named_without_its_password(url: str) -> None:
    with pytest.raises(StoreError) as refused:
        open_store(url)
    assert "PW" not in str(refused.value)
    assert "rw" in str(refused.value)
