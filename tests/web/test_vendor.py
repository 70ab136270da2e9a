"""The vendored AG Grid build is the one its recipe pins, unchanged since `make ui-vendor`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "src/playline/web/static/vendor"


def test_the_vendored_grid_matches_its_checksum_and_licence() -> None:
    expected = dict(
        reversed(line.split()) for line in (VENDOR / "SHA256SUMS").read_text().splitlines()
    )
    for name, digest in expected.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, (
            f"{name} changed: rebuild it with `make ui-vendor`, which rewrites SHA256SUMS"
        )
    assert "ag-grid.min.js" in expected
    assert "MIT License" in (VENDOR / "ag-grid.LICENSE.txt").read_text()


def test_the_recipe_pins_exact_versions_that_its_lockfile_holds() -> None:
    recipe = json.loads((ROOT / "ui/package.json").read_text())
    lock = json.loads((ROOT / "ui/package-lock.json").read_text())
    for name, version in {**recipe["dependencies"], **recipe["devDependencies"]}.items():
        assert version[0].isdigit(), f"{name} is not pinned ({version})"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version


def test_the_build_is_one_es_module_with_no_imports_of_its_own() -> None:
    text = (VENDOR / "ag-grid.min.js").read_text()
    assert "export{" in text.replace(" ", "")
    assert "import(" not in text and not text.startswith("import")
