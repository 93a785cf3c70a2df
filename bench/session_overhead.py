"""What sessions cost per step: the state save (history rewritten atomically) and the stat scan
around each run_shell, against `git status` (git's own C stat cache, the peer for "what changed").

    python bench/session_overhead.py [TREE]      # default: this repository

Prints milliseconds and the scan / `git status` ratio. The watcher gives up on a workspace whose
scan takes longer than keel.trace.shellwatch.SCAN_BUDGET_S, so the ratio bounds the overhead.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from keel.core.files import write_atomic
from keel.trace.shellwatch import SCAN_BUDGET_S, scan


def _ms(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> int:
    tree = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    files = len(scan(tree))
    scan_ms = _ms(lambda: scan(tree))
    print(f"stat scan of {tree}: {files} files, {scan_ms:.1f} ms (budget {SCAN_BUDGET_S * 1000:.0f} ms)")
    if (tree / ".git").exists():
        git_ms = _ms(lambda: subprocess.run(["git", "--no-optional-locks", "status", "--porcelain"], cwd=tree,
                                            capture_output=True, check=False))
        print(f"git status: {git_ms:.1f} ms; keel scan / git status = {scan_ms / git_ms:.2f}x")
    history = [{"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 5000} for i in range(200)]
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state.json"
        save_ms = _ms(lambda: write_atomic(state, json.dumps({"messages": history}).encode()))
        print(f"state save, 1 MB history: {save_ms:.1f} ms (twice per step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
