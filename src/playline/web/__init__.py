"""``playline ui``: a live browser view of runs, their cells, costs and logs.

A Starlette app over the store (``app.py``), its live streams (``sse.py``) and its actions
(``actions.py``), with pages from Jinja2 templates and plain ES modules (``static/``; AG Grid
Community vendored under ``static/vendor``). It reads everything from the store, so it shows a
run in this process, in another one, or on another machine the same way.
"""

from __future__ import annotations

from .app import UIConfig, create_app
from .server import serve

__all__ = ["UIConfig", "create_app", "serve"]
