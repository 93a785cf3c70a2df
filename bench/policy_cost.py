"""The shell policy's cost on the ported suites, against the code it replaced, in the same run.

The commands are the peers' cases (tests/fixtures/peers), the everyday list
(tests/fixtures/everyday_commands.json) and the differential test's generated lines. The same
commands are judged by this checkout and by a git worktree of the base commit (default: where
this branch left main, ``git merge-base HEAD main``), each in its own fresh process, alternating,
several rounds; the median time per round and the ratio new/base are printed (issue 33's target:
at most 1.5x). Run: ``python bench/policy_cost.py [--base REV] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMER = r"""
import json, sys, tempfile, time
from pathlib import Path
from keel.policy.shell.risk import classify_command
commands = json.loads(Path(sys.argv[1]).read_text())
ws = Path(tempfile.mkdtemp())
(ws / "src").mkdir(); (ws / "f.py").write_text("x\n")
loading = time.perf_counter()
classify_command("ls", ws)                      # the parser and the tables load outside the timing
loaded = time.perf_counter() - loading
started = time.perf_counter()
for command in commands:
    for confined in (False, True):
        classify_command(command, ws, confined=confined)
print(json.dumps({"seconds": time.perf_counter() - started, "first": loaded}))
"""


def commands() -> list[str]:
    tests = ROOT / "tests"
    out: list[str] = []
    for path in sorted((tests / "fixtures" / "peers").glob("*.json")):
        out += [c["command"].replace("OTHER_REPO", "/tmp") for c in json.loads(path.read_text())["cases"]]
    out += [c["command"] for c in json.loads((tests / "fixtures" / "everyday_commands.json").read_text())["commands"]]
    sys.path.insert(0, str(tests))
    from test_policy_differential import generate

    return out + generate(random.Random(33), 400)


def run(checkout: Path, listing: Path) -> tuple[float, float]:
    """(seconds for every judgement, seconds for the first: the parser and the tables loading)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.run([sys.executable, "-c", TIMER, str(listing)], env=env, capture_output=True, text=True,
                          check=True, cwd=checkout)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(result["seconds"]), float(result["first"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=None, help="the commit to compare with (default: merge-base with main)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    base = args.base or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True,
                                       text=True, check=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="keel-policy-cost-"))
    listing = work / "commands.json"
    listing.write_text(json.dumps(commands()))
    old = work / "base"                     # the base's keel package, unpacked (no worktree to register)
    old.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", base, "keel"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    new_runs, old_runs = [], []
    for _ in range(args.rounds):            # alternating: a busy machine slows both alike
        new_runs.append(run(ROOT, listing))
        old_runs.append(run(old, listing))
    count = len(json.loads(listing.read_text())) * 2
    new, previous = (statistics.median(r[0] for r in runs) for runs in (new_runs, old_runs))
    new_first, old_first = (statistics.median(r[1] for r in runs) for runs in (new_runs, old_runs))
    print(f"{count} judgements (ported suites, everyday list, 400 generated lines; no tier and a confining tier)")
    print(f"base {base[:10]}: {previous:6.2f} s  ({previous / count * 1e3:.2f} ms each; first {old_first * 1e3:.0f} ms)")
    print(f"this checkout : {new:6.2f} s  ({new / count * 1e3:.2f} ms each; first {new_first * 1e3:.0f} ms, "
          "the command table and its examples loading)")
    print(f"ratio new/base: {new / previous:.2f}x  (target: at most 1.5x)")


if __name__ == "__main__":
    main()
