"""Every script in bench/ still imports: a benchmark is run by hand, rarely, so a name it imports from
keel that moved goes unnoticed until someone needs the numbers (bench/exercism.py imported kill_group,
bench/linear_text.py _task_names, both gone, for sessions)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
# modules the scripts import from bench/ and tests/ themselves: one of them missing is a failure too
LOCAL = tuple(p.stem for p in (*BENCH.glob("*.py"), *Path(__file__).resolve().parent.glob("*.py")))


@pytest.mark.parametrize("script", sorted(p.stem for p in BENCH.glob("*.py")))
def test_a_bench_script_imports(script: str) -> None:
    # in a process of its own: each inserts its own paths, and one's imports must not hide another's
    code = f"import sys; sys.path.insert(0, {str(BENCH)!r}); import importlib; importlib.import_module({script!r})"
    ran = subprocess.run([sys.executable, "-c", code], cwd=BENCH, capture_output=True, text=True, timeout=120)
    missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", ran.stderr)
    if ran.returncode and missing and missing.group(1).split(".")[0] not in ("keel", *LOCAL):
        pytest.skip(f"{script} needs {missing.group(1)}, an optional package not installed here")
    assert ran.returncode == 0, ran.stderr[-2000:]
