"""The grid shows columns whose names AG Grid or JavaScript objects would misread.

A field named "" (AG Grid would give it the id "0", then sort by it) or "__proto__" /
"constructor" / "toString" (Object properties) still gets its header and its cells, and the
grid loads (issue 43's browser sweep found both grids stuck at "…").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline.store import open_store
from playline.web import UIConfig, create_app
from services import chromium_context, serve_asgi

WAIT_MS = 20_000


@pytest.mark.parametrize("odd", ["", "__proto__", "constructor", "toString", "_index"])
def test_a_field_with_an_odd_name_is_a_column(
    odd: str, tmp_path: Path, chromium_path: Path
) -> None:
    """The grid loads; the odd field's header and value show; no 400 asks for sort=0."""
    row = {"k": "v", odd: "oddvalue"}

    @pl.play(name="web-odd-name")
    async def play(ctx: pl.Context, input: Any) -> int:
        return len(await ctx.dataset("d", [row], key="k").with_column("c", lambda r: 1).run())

    url = f"sqlite:///{tmp_path}/odd.db"
    db = open_store(url)
    result = pl.run(play, store=db)
    assert result.status == "completed", result.error
    with (
        serve_asgi(create_app(UIConfig(store=db, store_url=url))) as base,
        chromium_context(chromium_path) as browser,
    ):
        page = browser.new_page()
        failed: list[str] = []
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        page.on("pageerror", lambda e: failed.append(str(e)))
        page.goto(f"{base}/grid/{result.run_id}?dataset=d")
        cells = page.locator(".ag-center-cols-container .ag-row .cell-in, "
                             ".ag-center-cols-container .ag-row .value")  # fmt: skip
        cells.filter(has_text="oddvalue").first.wait_for(timeout=WAIT_MS)
        heads = page.locator(".ag-header-cell .col-name").all_inner_texts()
        assert odd in heads, heads
        assert "sort=" not in page.url, page.url
        cells.filter(has_text="oddvalue").first.click()  # the row's drawer opens
        page.locator("#drawer:not([hidden])").wait_for(timeout=WAIT_MS)
        isolated = page.eval_on_selector(
            ".ag-center-cols-container .value", "e => getComputedStyle(e).unicodeBidi"
        )
        assert isolated == "isolate", isolated  # a U+202E in data reverses no other text
        assert not failed, failed
    db.close()
