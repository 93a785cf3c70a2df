"""Fetch peer implementations from PyPI into bench/.cache for side-by-side measurement.

Each peer gets its own virtual environment that can see the interpreter's packages
(``--system-site-packages``), so pip installs the peer with every dependency it declares that is
not already present — a clean clone has only keel's own install, and a peer installed without
its dependencies fails on the first missing import. The interpreter's environment is never
changed; the peer's site-packages directory is appended to ``sys.path`` by the caller, so keel
keeps the package versions it was installed with.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".cache"


def _site_packages(env: Path) -> Path:
    purelib = sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)})
    return Path(purelib)


def pip_target(name: str, *packages: str) -> Path:
    """Install ``packages`` (with their dependencies) once into ``.cache/<name>``; returns the
    site-packages directory to append to ``sys.path``."""
    env = CACHE / f"{name}-env"
    marker = env / ".complete"
    if not marker.exists():
        shutil.rmtree(env, ignore_errors=True)  # a half-finished install is redone, not trusted
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env)], check=True)
        python = env / "bin" / "python"
        print(f"bench: installing {' '.join(packages)} and their dependencies into {env} (once)",
              file=sys.stderr)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
                       check=True)
        marker.write_text("ok")
    return _site_packages(env)
