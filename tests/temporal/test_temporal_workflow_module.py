"""The workflow module stays tiny and pure: it imports Temporal's SDK, the standard library's
dataclasses and time types, and its messages (inside ``imports_passed_through``), nothing
else: no store, no sqlite3 (which Temporal's sandbox would let through), no play code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import playline.backends._temporal as package

FOLDER = Path(package.__file__).parent
WORKFLOW = FOLDER / "_workflow.py"
MESSAGES = FOLDER / "_messages.py"


def imports(path: Path) -> list[tuple[str, bool]]:
    """Every module ``path`` imports (relative ones with their dots), and whether the import
    sits inside ``with workflow.unsafe.imports_passed_through():``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    passed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            ast.unparse(item.context_expr) == "workflow.unsafe.imports_passed_through()"
            for item in node.items
        ):
            passed.update(id(inner) for inner in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, id(node) in passed) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append(("." * node.level + (node.module or ""), id(node) in passed))
    return found


def test_the_workflow_imports_only_the_sdk_and_its_messages() -> None:
    found = imports(WORKFLOW)
    assert sorted(found) == [
        ("._messages", True),  # passed through the sandbox
        ("__future__", False),
        ("contextlib", False),
        ("datetime", False),
        ("temporalio", False),
        ("temporalio.common", False),
    ]


def test_the_messages_are_plain_dataclasses() -> None:
    assert sorted(name for name, _ in imports(MESSAGES)) == ["__future__", "dataclasses"]


def test_loading_the_workflow_loads_no_store_and_no_playline() -> None:
    """Loaded on its own (its package's __init__ left out), the workflow module's imports
    reach neither Playline nor a database driver."""
    code = (
        "import sys, types\n"
        f"pkg = types.ModuleType('wfpkg'); pkg.__path__ = [{str(FOLDER)!r}]\n"
        "sys.modules['wfpkg'] = pkg\n"
        "import wfpkg._workflow\n"
        "print(sorted(m for m in sys.modules if m in ('sqlite3', '_sqlite3') "
        "or m.startswith(('playline', 'psycopg', 'httpx'))))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert loaded.stdout.strip() == "[]"


def test_the_facade_exports_a_sorted_all_of_names_it_has() -> None:
    from playline.backends import temporal

    assert temporal.__all__ == sorted(temporal.__all__)
    assert all(hasattr(temporal, name) for name in temporal.__all__)
