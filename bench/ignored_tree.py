"""What issue 35 costs each command, against the code before it, measured in the same run.

    python bench/ignored_tree.py [--base REV]      # REV: default the merge-base of HEAD and main

Builds a workspace of 2,000 source files (~20 MB) beside a 200 MB git-ignored folder, in two forms:
a dependency tree (``node_modules``, 20,000 files of 10 KB) and an ignored data folder (``data/``,
400 files of 512 KB). For this tree and for REV (exported with `git archive` into a temp dir, run in
its own interpreter), in turns:

- the shell watch around one command that touches nothing ignored (scan before, snapshot, scan after,
  record): the first command and the median of later ones;
- the command environment (``command_environment`` of a 120-variable environment: the old list of
  secret names against the allow-list);
- the bubblewrap tier's search for secret files before each command (the old capped ``.env``
  search against the incremental pattern scan with no cap).

Prints milliseconds and each ratio now/before; the target is a later command costing no more than
before (ratio ≈ 1) on both workspaces.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = r"""
import json, os, statistics, sys, time
from pathlib import Path
from keel.tools.base import Tool, ToolArgs, ToolContext, ToolResult, ToolSpec
from keel.trace.checkpoints import CheckpointStore
from keel.trace.shellwatch import ShellWatch
from keel.policy.cmdenv import command_environment

work, session = Path(sys.argv[1]), Path(sys.argv[2])


class Args(ToolArgs):
    pass


def ms(fn, n, clock=time.perf_counter):
    out = []
    for _ in range(n):
        t = clock()
        fn()
        out.append((clock() - t) * 1000)
    return statistics.median(out)


tool = ShellWatch(CheckpointStore(session, work), lambda *a, **k: None).wrap(
    Tool(ToolSpec("run_shell", "", Args), lambda a, c: ToolResult(ok=True, output="ok")))
ctx = ToolContext(workspace=work)
t = time.perf_counter()
tool.execute(Args(), ctx)
first = (time.perf_counter() - t) * 1000
later = ms(lambda: tool.execute(Args(), ctx), 9)
later_cpu = ms(lambda: tool.execute(Args(), ctx), 9, time.process_time)   # less swayed by a busy machine
env = {f"VAR_{i}": f"value-{i}" for i in range(100)}
env.update(PATH="/usr/bin:/bin", HOME="/root", LANG="C.UTF-8", VIRTUAL_ENV="/v", DB_PASS="x" * 12,
           GITHUB_TOKEN="t" * 40, **{f"LC_{i}": "C" for i in range(10)})
env_us = ms(lambda: [command_environment(env) for _ in range(100)], 5) * 10
try:
    from keel.policy.hide import find_secret_files
    scan = lambda: find_secret_files(os.path.realpath(work))
except ImportError:
    from keel.policy.sandbox import find_env_files
    scan = lambda: find_env_files(work)
scan()
secrets_ms = ms(scan, 9)
print(json.dumps({"first": first, "later": later, "later_cpu": later_cpu, "env_us": env_us, "secrets": secrets_ms}))
"""


def _build(root: Path, ignored: str) -> None:
    for i in range(2000):
        d = root / "src" / f"pkg{i % 40}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"m{i}.py").write_bytes((b"x = %d\n" % i) * 1300)
    (root / ".env").write_text("KEY=1\n")
    (root / ".gitignore").write_text("data/\nnode_modules/\n")
    if ignored == "node_modules":
        for i in range(20_000):
            d = root / "node_modules" / f"pkg{i % 800}" / "lib"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"f{i}.js").write_bytes(b"//" * 5120)
    else:
        (root / "data").mkdir()
        for i in range(400):
            (root / "data" / f"chunk{i}.bin").write_bytes(bytes([i % 256]) * (512 * 1024))


def _measure(pythonpath: Path, work: Path, tmp: Path, tag: str) -> dict[str, float]:
    session = tmp / f"session-{tag}"
    shutil.rmtree(session, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(work), str(session)], env=env, capture_output=True,
                          text=True, check=True)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=None, help="the revision to compare with (default: merge-base with main)")
    args = parser.parse_args()
    base = args.base or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=REPO, capture_output=True,
                                       text=True, check=True).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="keel-bench-ignored-", dir="/var/tmp"))
    try:
        before = tmp / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", base], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        print(f"before: {base[:10]}; now: the working tree of {REPO}")
        for ignored in ("node_modules", "data"):
            work = tmp / f"work-{ignored}"
            _build(work, ignored)
            print(f"\nworkspace: 2,000 source files (~20 MB) + a 200 MB git-ignored {ignored}/")
            runs: dict[str, list[dict[str, float]]] = {"before": [], "now": []}
            for i in range(3):          # in turns, so a busy machine slows both alike
                runs["before"].append(_measure(before, work, tmp, f"b{i}"))
                runs["now"].append(_measure(REPO, work, tmp, f"n{i}"))
            for key, label, unit in (("first", "first command (snapshot of everything)", "ms"),
                                     ("later", "later command, touching nothing ignored", "ms"),
                                     ("later_cpu", "the same, CPU time", "ms"),
                                     ("env_us", "command environment, 120 variables", "µs"),
                                     ("secrets", "bubblewrap's secret-file search", "ms")):
                old = statistics.median(r[key] for r in runs["before"])
                new = statistics.median(r[key] for r in runs["now"])
                print(f"  {label:<44} before {old:8.1f} {unit}   now {new:8.1f} {unit}   now/before {new / old:5.2f}")
            shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
