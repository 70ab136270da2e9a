"""The shared gates' tests run on every store (PLAYLINE_TEST_STORE restricts them to one):
``gate_url`` is a fresh store URL; each store object opened on it stands for a process."""

from __future__ import annotations

from pathlib import Path

import pytest

from stores import store_kinds, url_for


@pytest.fixture(params=store_kinds())
def gate_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return url_for(request.param, request, tmp_path)
