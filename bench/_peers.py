"""Fetch peer implementations from PyPI into bench/.cache for side-by-side measurement.

Only registry downloads by package name; nothing is installed into the environment.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".cache"


def pip_target(name: str, *packages: str) -> Path:
    """``pip install --no-deps --target`` once, then reuse; returns the directory to put on sys.path."""
    target = CACHE / name
    marker = target / ".complete"
    if not marker.exists():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                        *packages], check=True)
        marker.write_text("ok")
    return target
