"""Suite-wide settings: under CI, hypothesis runs its examples deterministically; the real
services' fixtures (PostgreSQL, Temporal, Chromium: see services.py) and ``store_url`` (a
fresh store of the kind PLAYLINE_TEST_STORE names: see stores.py) are registered here."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from playline import _secrets
from services import (
    chromium_path,
    collect_native_garbage,
    postgres_password_url,
    postgres_server,
    postgres_url,
    temporal_bin,
    temporal_server,
    temporal_time_skipping_path,
)
from stores import default_store, durable_store_url, every_store, store_kind, store_url

settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

__all__ = [
    "chromium_path",
    "default_store",
    "durable_store_url",
    "postgres_password_url",
    "postgres_server",
    "postgres_url",
    "store_kind",
    "store_url",
    "temporal_bin",
    "temporal_server",
    "temporal_time_skipping_path",
]


@pytest.fixture(autouse=True)
def _secrets_of_other_tests_forgotten() -> None:
    """Each test starts knowing no secret: the registry of secrets read is the process's, so
    a short one another test read in this worker ("short") would be found in this test's data
    (an LLM's answer) and refused as a leak."""
    registry = _secrets._registry
    with registry._lock:
        registry._names.clear()
        registry._needles, registry._small, registry._text = (), None, None


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # Temporal's native objects must not be left for interpreter shutdown (see services.py).
    collect_native_garbage()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--every-store-in",
        action="append",
        default=[],
        metavar="FOLDER",
        help="run this folder's tests that use a store on every store (PLAYLINE_TEST_STORE "
        "restricts it): the passes of make test in one session. Repeat for more folders.",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if suites := metafunc.config.getoption("every_store_in"):
        every_store(metafunc, suites)
