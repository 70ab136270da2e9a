"""Every status a page shows in a badge (``badge status-<status>``) has its colour."""

from __future__ import annotations

import re
from pathlib import Path

from playline._trace import SHOWN_FOR_RUNNING, STOPPED
from playline.store import RunStatus

CSS = Path(__file__).resolve().parents[2] / "src/playline/web/static/app.css"
# a dataset's statuses beyond a run's (datasets.py emits them in its "dataset" events)
DATASET_ONLY = (STOPPED, "waiting")


def test_every_run_and_dataset_status_has_a_badge_colour() -> None:
    styled = set(re.findall(r"\.status-([a-z_]+)\b", CSS.read_text()))
    shown = {s.value for s in RunStatus} | set(SHOWN_FOR_RUNNING) | set(DATASET_ONLY)
    assert shown - styled == set()
