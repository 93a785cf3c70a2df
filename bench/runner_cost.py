"""What one door costs per command: run_shell through keel.policy.runner against the same tool at the
commit before the runner (each command spawned by build_sandboxed + process.run_command there, with
the run-later guard around it), in the same run.

    python bench/runner_cost.py [--base REV] [--rounds 5] [--per-round 8] [--ballast-mb 0,200]

Both trees run the same commands (``true``, ``echo``, ``ls -la``, ``python3 -c pass``, ``git status``)
in the same small project (40 folders, 400 files, a git repository) under each tier this machine
has (bubblewrap, Landlock, none), in two driver processes that alternate round by round, so a busy
machine slows both alike. ``--ballast-mb`` makes each driver hold that much memory, as keel does
with its history and engine: a ``preexec_fn`` (the old way to set rlimits) forks the whole process,
the runner's exec wrapper does not. The default base is the parent of the commit that added
keel/policy/runner.py. Prints the median milliseconds per command and new / base (target: <= 1.2).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ["true", "echo hello", "ls -la", "python3 -c pass", "git status --short"]
DRIVER = r"""
import json, sys, time
from pathlib import Path
from keel.policy.sandbox import SandboxPolicy, detect_sandbox
from keel.tools.base import ToolContext
from keel.tools.shell import RunShellArgs, run_shell

ws, tier, per_round, commands, ballast_mb = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5])
ballast = bytearray(ballast_mb * 1024 * 1024)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1

class AllowAll:
    def authorize_shell(self, command):
        return type("Outcome", (), {"allowed": True, "message": "", "decision": "allow", "network": False})()

if tier != "off" and detect_sandbox(tier).kind != tier:
    print(json.dumps(None)); sys.exit(0)
policy = SandboxPolicy(enabled=False) if tier == "off" else SandboxPolicy(tier=tier)
ctx = ToolContext(workspace=ws, approval=AllowAll(), sandbox=policy)
run_shell(RunShellArgs(command="true"), ctx)      # warm: detection, caches
times = []
for _ in range(per_round):
    for command in commands:
        t = time.perf_counter()
        result = run_shell(RunShellArgs(command=command), ctx)
        times.append((time.perf_counter() - t) * 1000)
        assert result.ok, result.output
print(json.dumps(times))
"""


def _base_rev(given: str | None) -> str:
    if given:
        return given
    added = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", "keel/policy/runner.py"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    return f"{added[-1]}^"


def _export(rev: str, dest: Path) -> None:
    archive = subprocess.run(["git", "archive", rev, "keel"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def _project(dest: Path) -> Path:
    for d in range(40):
        folder = dest / f"pkg{d}"
        folder.mkdir(parents=True)
        for f in range(10):
            (folder / f"mod{f}.py").write_text(f"def f{f}():\n    return {f}\n")
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "x"], cwd=dest, check=True)
    return dest


def _batch(tree: Path, ws: Path, tier: str, per_round: int, ballast: int) -> list[float] | None:
    done = subprocess.run([sys.executable, "-c", DRIVER, str(ws), tier, str(per_round), json.dumps(COMMANDS),
                           str(ballast)], env={**_env(), "PYTHONPATH": str(tree)}, capture_output=True, text=True,
                          timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"driver failed ({tree}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the commit to compare against (default: before the runner)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=8)
    parser.add_argument("--ballast-mb", default="0,200", help="memory each driver holds, comma-separated")
    parser.add_argument("--tiers", default="bubblewrap,landlock,off")
    args = parser.parse_args()
    base = _base_rev(args.base)
    with tempfile.TemporaryDirectory(prefix="keel-bench-", dir="/var/tmp") as tmp:
        old = Path(tmp) / "base"
        old.mkdir()
        _export(base, old)
        ws = _project(Path(tmp) / "ws")
        print(f"base {base} vs the working tree; {len(COMMANDS)} commands x {args.per_round} x {args.rounds} rounds")
        print(f"{'tier':<11} {'ballast':>8} {'base ms':>9} {'runner ms':>10} {'runner/base':>12}")
        for ballast in (int(b) for b in args.ballast_mb.split(",")):
            for tier in args.tiers.split(","):
                times: dict[str, list[float]] = {"base": [], "new": []}
                for _ in range(args.rounds):
                    for name, tree in (("base", old), ("new", ROOT)):
                        got = _batch(tree, ws, tier, args.per_round, ballast)
                        if got is None:
                            break
                        times[name] += got
                if not times["new"] or not times["base"]:
                    print(f"{tier:<11} {'':>8} not available here")
                    continue
                b, n = statistics.median(times["base"]), statistics.median(times["new"])
                print(f"{tier:<11} {ballast:>6}MB {b:>9.1f} {n:>10.1f} {n / b:>11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
