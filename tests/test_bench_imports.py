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


def test_a_batch_ended_with_sigterm_runs_its_cleanup() -> None:
    """bench/real_engine.exit_on_term: a batch ended with pkill left its llama_cpp.server generating,
    under the next batch's runs; with it, SIGTERM goes through ``finally`` as Ctrl-C does."""
    code = (f"import sys, time; sys.path.insert(0, {str(BENCH)!r}); from real_engine import exit_on_term\n"
            "exit_on_term()\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\n"
            "finally:\n    print('server stopped', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=BENCH, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    assert out.strip() == "server stopped" and proc.returncode == 143
