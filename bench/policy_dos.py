"""The shell policy's own cost on pathological commands (keel issue 21: denial of service of the judge).

Before the budget (issue 21's measurements): ``cd d0 || cd e0;`` x12 took 157 s and 1 GB, growing
x2.7 per pair; ``a=$a$a`` x28 took 5.3 GB. Run: ``python bench/policy_dos.py``; prints, per
command, the time, the peak memory of the judge and the verdict, and the growth per step.
"""

from __future__ import annotations

import tempfile
import time
import tracemalloc
from pathlib import Path

from keel.policy.shell.risk import classify_command


def measure(command: str, workspace: Path) -> tuple[float, int, str]:
    started = time.perf_counter()
    verdict = classify_command(command, workspace, confined=True)
    elapsed = time.perf_counter() - started
    tracemalloc.start()                      # memory in a second run: tracing slows the first
    classify_command(command, workspace, confined=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak, f"{verdict.decision}: {verdict.reason[:60]}"


def main() -> None:
    workspace = Path(tempfile.mkdtemp())
    classify_command("ls", workspace)          # load the parser outside the timings
    series = {
        "cd d0 || cd e0; x{n}": [("cd d0 || cd e0; " * n + "ls", n) for n in (4, 8, 12, 16, 24, 48)],
        "a=x; a=$a$a x{n}": [("a=x; " + "a=$a$a; " * n + "echo $a", n) for n in (8, 16, 28, 40)],
        "cd l && cd .. || cd d; x{n}": [("cd l && cd .. || cd d; " * n + "ls", n) for n in (4, 12, 30)],
    }
    for name, runs in series.items():
        previous = None
        for command, n in runs:
            elapsed, peak, verdict = measure(command, workspace)
            growth = f"x{elapsed / previous:.2f}" if previous else ""
            previous = elapsed
            print(f"{name.format(n=n):32} {elapsed * 1000:8.1f} ms {peak / 1e6:7.2f} MB {growth:>7}  {verdict}")


if __name__ == "__main__":
    main()
