"""scripts/ensure_system_packages.py: what it decides to install, and that it stays quiet (no
apt call at all) when everything is there."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure_system_packages.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ensure_system_packages", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


script = load_script()


def fake_root(tmp_path: Path, *files: str) -> Path:
    for name in files:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    return tmp_path


def dry_run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--root", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_an_empty_machine_misses_both(tmp_path: Path) -> None:
    assert script.missing_packages(tmp_path) == ["postgresql", "chromium"]


def test_any_postgresql_version_counts(tmp_path: Path) -> None:
    root = fake_root(tmp_path, "usr/lib/postgresql/17/bin/initdb")
    assert script.missing_packages(root) == ["chromium"]


def test_nothing_missing_means_no_command(tmp_path: Path) -> None:
    root = fake_root(tmp_path, "usr/lib/postgresql/15/bin/initdb", "usr/bin/chromium")
    assert script.missing_packages(root) == []
    assert script.install_commands([], euid=0, sudo=None) == []
    assert script.install_commands([], euid=1000, sudo=None) == []  # no error either


def test_root_runs_apt_get_update_then_install() -> None:
    update, install = script.install_commands(["chromium"], euid=0, sudo="/usr/bin/sudo")
    assert update[:2] == ["env", "DEBIAN_FRONTEND=noninteractive"]
    assert update[2] == "apt-get" and update[-1] == "update"
    assert install[:2] == ["env", "DEBIAN_FRONTEND=noninteractive"]
    assert install[-3:] == ["install", "-y", "chromium"]


def test_a_user_goes_through_sudo_without_a_prompt() -> None:
    commands = script.install_commands(["postgresql"], euid=1000, sudo="/usr/bin/sudo")
    for command in commands:
        assert command[:4] == ["/usr/bin/sudo", "-n", "env", "DEBIAN_FRONTEND=noninteractive"]
    assert commands[-1][-3:] == ["install", "-y", "postgresql"]


def test_a_user_without_sudo_is_told_what_to_install() -> None:
    with pytest.raises(script.CannotInstall) as caught:
        script.install_commands(["postgresql", "chromium"], euid=1000, sudo=None)
    message = str(caught.value)
    assert "apt-get install -y postgresql chromium" in message
    assert "\n" not in message


def test_dry_run_prints_what_it_would_install(tmp_path: Path) -> None:
    result = dry_run(fake_root(tmp_path, "usr/bin/chromium"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("apt-get -o DPkg::Lock::Timeout=300 update")
    assert lines[1].endswith("install -y postgresql")


def test_dry_run_on_a_complete_machine_installs_nothing(tmp_path: Path) -> None:
    root = fake_root(tmp_path, "usr/lib/postgresql/15/bin/initdb", "usr/bin/chromium")
    result = dry_run(root)
    assert (result.returncode, result.stdout) == (0, "nothing to install\n")


def test_this_machine_has_everything_after_make() -> None:
    # `make test` ran the script before pytest: the real root now lacks nothing.
    assert script.missing_packages() == [], "run `make test` (it installs them)"
