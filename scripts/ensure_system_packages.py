#!/usr/bin/env python3
"""Install the Debian packages the test suite's real services need, and nothing else.

`make test` runs this before pytest: CI starts from a clean machine that has Python, make, git
and stock Debian packages, and the tests start a real PostgreSQL and a real headless Chromium
(they never skip themselves when one is missing). pip cannot install either, so apt-get does.

It is quick when everything is present: it only looks at files (no apt call at all). When
something is missing it runs `apt-get update` once and `apt-get install -y` for the missing
packages, as root, or through `sudo -n` when not root. When neither is possible it says what to
install by hand and exits with status 1.

Standard library only: it runs with the system Python before the venv exists.

    python3 scripts/ensure_system_packages.py            # install what is missing
    python3 scripts/ensure_system_packages.py --dry-run  # print what it would run
"""

from __future__ import annotations

import argparse
import glob
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Requirement:
    """A Debian package, and the file whose presence shows it is installed."""

    package: str
    present_if: str  # a glob below the root directory (no leading "/")
    why: str


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("postgresql", "usr/lib/postgresql/*/bin/initdb", "PostgreSQL server for tests"),
    Requirement("chromium", "usr/bin/chromium", "headless browser for UI tests (Playwright)"),
)

# Wait for another apt/dpkg run (a parallel worker) instead of failing on its lock.
APT_OPTIONS = ("-o", "DPkg::Lock::Timeout=300")


class CannotInstall(Exception):
    """Packages are missing and this user can neither run apt-get nor sudo without a password."""


def missing_packages(root: Path = Path("/")) -> list[str]:
    """The packages of REQUIREMENTS whose marker file is absent under `root`."""
    return [
        req.package
        for req in REQUIREMENTS
        if not glob.glob(os.path.join(os.fspath(root), req.present_if))
    ]


def install_commands(packages: Sequence[str], euid: int, sudo: str | None) -> list[list[str]]:
    """The commands that install `packages`: none when nothing is missing.

    As root they run as they are; otherwise through `sudo -n` (never prompting: CI has no
    terminal). `sudo` is the path of the sudo executable, or None when there is none.
    """
    if not packages:
        return []
    if euid == 0:
        prefix = ["env", "DEBIAN_FRONTEND=noninteractive"]
    elif sudo is not None:
        prefix = [sudo, "-n", "env", "DEBIAN_FRONTEND=noninteractive"]
    else:
        names = " ".join(packages)
        raise CannotInstall(
            f"missing Debian packages: {names}; not root and no sudo: install them as root "
            f"with `apt-get update && apt-get install -y {names}`, then run make again"
        )
    return [
        [*prefix, "apt-get", *APT_OPTIONS, "update"],
        [*prefix, "apt-get", *APT_OPTIONS, "install", "-y", *packages],
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run none")
    parser.add_argument(
        "--root", type=Path, default=Path("/"), help="where to look for the marker files"
    )
    args = parser.parse_args(argv)

    packages = missing_packages(args.root)
    try:
        commands = install_commands(packages, os.geteuid(), shutil.which("sudo"))
    except CannotInstall as exc:
        print(f"ensure-system-packages: {exc}", file=sys.stderr)
        return 1
    if not commands:
        if args.dry_run:
            print("nothing to install")
        return 0
    for command in commands:
        print(f"ensure-system-packages: {shlex.join(command)}", flush=True)
        if args.dry_run:
            continue
        result = subprocess.run(command, check=False)
        if result.returncode != 0:
            print(
                f"ensure-system-packages: `{shlex.join(command)}` failed with status "
                f"{result.returncode}; install {' '.join(packages)} by hand, then run make again",
                file=sys.stderr,
            )
            return 1
    if not args.dry_run:
        still = missing_packages(args.root)
        if still:
            print(
                f"ensure-system-packages: apt-get installed, but {' '.join(still)} still "
                "lacks its files; check the package names for this Debian release",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
