"""Search speed: keel's grep tool vs raw ripgrep vs git grep, plus keel's Python fallback.

Corpus: this interpreter's stdlib and site-packages, searched in place (the workspace is their
common parent; nothing is copied, and symlinks are not followed by any of the tools).

Columns, all measured in this run, best of 3 after one warm-up (p50 shown too); the tools take
turns within each round so a busy machine slows them alike:
- keel     the grep tool as the loop calls it (GREP.execute with a ToolContext), ripgrep backend,
           max_results huge so every match is counted; output capped as usual.
- rg       raw ripgrep with the same ignore/hidden/skip flags, plain `-n` output into a pipe.
- git      `git grep --no-index -I -n` (-F / -P / -i), same skipped dirs. No --exclude-standard:
           with --no-index it applies the .gitignore of a repository *around* the corpus (pyenv's
           "/versions" hides everything); the corpus itself has no .gitignore files.
- python   keel's grep tool forced onto the in-process fallback.

keel, rg and python must report identical counts (matching lines, secret files excluded from
all three); git grep's count is shown for reference (it judges binary files and encodings its
own way). Target: keel within 1.2x of raw rg on every pattern; python fallback within 1.5x of
rg on literal patterns.

Run: python bench/search.py [--repeat 3] [--skip-python]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from keel.context.ignore import ALWAYS_SKIPPED_DIRS, IgnoreRules, rg_skip_globs  # noqa: E402
from keel.policy.paths import is_secret_path  # noqa: E402
from keel.tools.base import ToolContext  # noqa: E402
from keel.tools.search import GREP, find_rg  # noqa: E402

PATTERNS: list[tuple[str, dict[str, Any]]] = [
    ("literal", {"pattern": "lru_cache", "fixed_strings": True}),
    ("regex", {"pattern": r"def [a-z_]+_cache\("}),
    ("case-insensitive", {"pattern": r"connection\s*timeout", "case_insensitive": True}),
    ("unicode", {"pattern": "naïve|café|Straße|Ελλάδα"}),
    ("many matches", {"pattern": "self", "fixed_strings": True}),
    ("no match", {"pattern": "zq_no_such_token_xj", "fixed_strings": True}),
]
LITERAL = {"literal", "many matches", "no match"}


def corpus() -> Path:
    paths = sysconfig.get_paths()
    return Path(os.path.commonpath([paths["stdlib"], paths["purelib"]]))


def count_lines(stdout: bytes) -> int:
    """Matching lines in `path:line:text` output, minus secret files (keel never shows those)."""
    total = 0
    for line in stdout.splitlines():
        path, sep, rest = line.partition(b":")
        if sep and rest[:1].isdigit() and not is_secret_path(Path(os.fsdecode(path))):
            total += 1
    return total


Runner = tuple[Callable[[], Any], Callable[[Any], int]]  # (the timed call, how to count its result)


def keel_runner(root: Path, backend: str, args: dict[str, Any]) -> Runner:
    ctx = ToolContext(workspace=root, extra={"grep_backend": backend})
    parsed = GREP.spec.args(**args, max_results=1_000_000)

    def run() -> Any:
        return GREP.execute(parsed, ctx)

    return run, lambda result: int(result.meta["matches"])


def rg_runner(root: Path, args: dict[str, Any], require_git: bool) -> Runner:
    rg = find_rg()
    assert rg is not None, "ripgrep is not installed"
    cmd = [rg, "--no-config", "-n", "--no-heading", "--color=never", "--hidden", "--no-ignore-dot",
           "--no-ignore-global", "--no-ignore-exclude", "--no-messages"]
    cmd += [] if require_git else ["--no-require-git"]
    cmd += ["-F"] if args.get("fixed_strings") else []
    cmd += ["-i"] if args.get("case_insensitive") else []
    for glob in rg_skip_globs():
        cmd += ["-g", glob]
    cmd += ["-e", args["pattern"], "--", "."]

    def run() -> bytes:
        # One pipe and no timeout: subprocess reads it with a single blocking read (no poll loop).
        return subprocess.run(cmd, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL).stdout

    return run, count_lines


def git_runner(root: Path, args: dict[str, Any]) -> Runner:
    cmd = ["git", "grep", "--no-index", "-I", "-n", "--color=never"]
    cmd += ["-F"] if args.get("fixed_strings") else ["-P"]
    cmd += ["-i"] if args.get("case_insensitive") else []
    cmd += ["-e", args["pattern"], "--", "."]
    cmd += [f":(exclude,glob)**/{name}/**" for name in sorted(ALWAYS_SKIPPED_DIRS)] + [":(exclude,glob)**/*.egg-info/**"]
    env = {**os.environ, "LC_ALL": "C.UTF-8"}

    def run() -> bytes:
        return subprocess.run(cmd, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env).stdout

    return run, count_lines


def measure(runners: dict[str, Runner], repeat: int) -> dict[str, tuple[float, float, int]]:
    """Per tool: (best, p50) seconds of ``repeat`` runs after a warm-up, and the count they
    agreed on. Tools take turns within each round, so a busy machine slows them alike;
    counting happens outside the timed part."""
    counts = {name: count_of(run()) for name, (run, count_of) in runners.items()}
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeat):
        for name, (run, count_of) in runners.items():
            started = time.perf_counter()
            result = run()
            times[name].append(time.perf_counter() - started)
            assert count_of(result) == counts[name], f"{name}: count changed between runs"
    return {name: (min(t), statistics.median(t), counts[name]) for name, t in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-python", action="store_true", help="leave out the (slow) fallback column")
    opts = parser.parse_args()
    root = corpus()
    require_git = IgnoreRules(root).require_git
    files = sum(len(names) for _, _, names in os.walk(root))
    print(f"corpus: {root} ({files} files; require_git={require_git}); rg: {find_rg()}")
    print(f"best of {opts.repeat} after a warm-up, seconds (p50 in brackets)\n")
    head = f"{'pattern':<17}{'matches':>9}  {'keel':>14}{'rg':>14}{'git grep':>14}{'python':>14}  {'keel/rg':>8}  {'py/rg':>6}"
    print(head)
    print("-" * len(head))
    failures = []
    for name, args in PATTERNS:
        runners = {"keel": keel_runner(root, "rg", args), "rg": rg_runner(root, args, require_git),
                   "git": git_runner(root, args)}
        if not opts.skip_python:
            runners["python"] = keel_runner(root, "python", args)
        got = measure(runners, opts.repeat)
        (keel_best, keel_p50, keel_n), (rg_best, rg_p50, rg_n) = got["keel"], got["rg"]
        git_best, git_p50, git_n = got["git"]
        py = got.get("python")
        ratio = keel_best / rg_best
        cells = [f"{keel_best:6.3f} [{keel_p50:5.2f}]", f"{rg_best:6.3f} [{rg_p50:5.2f}]",
                 f"{git_best:6.3f} [{git_p50:5.2f}]", "—" if py is None else f"{py[0]:6.3f} [{py[1]:5.2f}]"]
        py_ratio = "—" if py is None else f"{py[0] / rg_best:5.2f}x"
        print(f"{name:<17}{keel_n:>9}  " + "".join(f"{c:>14}" for c in cells) + f"  {ratio:7.2f}x  {py_ratio:>6}")
        if keel_n != rg_n or (py is not None and py[2] != keel_n):
            failures.append(f"{name}: counts differ: keel {keel_n}, rg {rg_n}, python {py and py[2]}")
        if git_n != keel_n:
            print(f"{'':<17}(git grep counted {git_n}: its own binary/encoding rules)")
        if ratio > 1.2:
            failures.append(f"{name}: keel is {ratio:.2f}x raw rg (target <= 1.2x)")
        if py is not None and name in LITERAL and py[0] / rg_best > 1.5:
            print(f"{'':<17}(python fallback {py[0] / rg_best:.2f}x rg on a literal pattern; target <= 1.5x)")
    print()
    for failure in failures:
        print("FAIL", failure)
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
