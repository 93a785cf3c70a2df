"""Exercism's Python practice exercises, keel against Aider, side by side on one GGUF (issue 37).

    python bench/exercism.py --track PATH --model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --out /tmp/exercism-run            # resumable: run it again with the same --out to go on
    python bench/exercism.py --out /tmp/exercism-run --report

Aider's code-editing benchmark (133 of these exercises, whole-file edits, two tries) is the published
anchor for small models: Qwen2.5-Coder-1.5B-Instruct 31.6%, the 3B 39.1% (Aider-AI/aider
aider/website/_data/edit_leaderboard.yml, 2024-11). This script runs three arms on each exercise:

- ``keel``: ``keel run --local MODEL`` in a workspace holding the stub and its test file (keel finds
  the tests as the project's checks; the test file is protected), the task the exercise's
  instructions plus Aider's addendum;
- ``aider-hidden``: Aider by its own benchmark protocol (bench/_aider_driver.py): the instructions in
  the message, the tests hidden, their output on the second try;
- ``aider-shown``: the same, with the test file in the chat read-only from the start, as keel sees it;
- ``keel-n1``, ``keel-n4``: keel with change_file's candidates at 1 and 4 (``keel`` is the configured 2);
  the report prints, for 1 -> 2 -> 4, the exercises each solved more and the wall time each one cost.

All arms: the same GGUF, temperature 0, the same context and threads, and the same wall time per
exercise (``--timeout``; past it a run is ended and graded on what it left; keel's includes loading
the model in process, Aider's starts once its server is up). Aider talks to ``python -m
llama_cpp.server`` on 127.0.0.1 (bench/_llama_server.py) with its prompt cache on, a server started
for each run (one shared server kept generating for a run already ended, and the next one waited). Each
run is graded alike: the original test files put back, then pytest. keel's false done is a run that
ended complete with failing tests.

The track. Exercism's Python track is not on a package registry, so ``--track`` names a copy of the
exercism/python repository: a checkout, or a bare git directory (it is read with ``git archive``;
the commit is recorded with every row). Nothing of it is committed here. To get one:
``git clone --depth 1 https://github.com/exercism/python`` where GitHub is reachable.

The sample. Active practice exercises (deprecated ones out), less the 30 issue 37 holds back for
acceptance. ``--sample N`` (45) takes from each difficulty of the track's config.json
``min(3, its size)`` exercises first, then the rest in proportion to each difficulty's size (largest
remainders), each difficulty's exercises ordered by the SHA-256 of their slug (fixed, not
alphabetical). The run order takes the difficulties in turn, so a batch cut short still spans them.

Aider runs in its own virtual environment (``--aider-python``; default /work/venvs/aider/bin/python,
made with ``python -m venv DIR && DIR/bin/pip install aider-chat``): it pins many packages, so it
never goes into keel's. Its model-info cache is written into the run's own HOME, so it fetches
nothing. keel runs from ``--keel-src`` (default: this checkout); to measure a fixed commit while the
tree changes, ``git archive COMMIT | tar -x -C DIR`` (and ``git rev-parse COMMIT > DIR/KEEL_COMMIT``, which
every row records) and pass DIR.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from real_engine import exit_on_term, keel_config, llama_server  # noqa: E402

from keel.eval.cases import run_command  # noqa: E402
from keel.eval.job import last_json_object, run_process  # noqa: E402
from keel.outputs.counts import run_counts  # noqa: E402

# issue 37: held back for acceptance, never in a sample
HELD_BACK = frozenset({
    "all-your-base", "camicia", "change", "circular-buffer", "eliuds-eggs", "forth", "game-of-life",
    "isbn-verifier", "knapsack", "line-up", "list-ops", "meetup", "phone-number", "pov", "rectangles",
    "relative-distance", "resistor-color-expert", "rest-api", "satellite", "say", "secret-handshake",
    "sgf-parsing", "state-of-tic-tac-toe", "swift-scheduling", "tournament", "transpose", "two-bucket",
    "word-search", "wordy", "yacht"})
AGENTS = ("keel", "aider-hidden", "aider-shown", "keel-n1", "keel-n4")
# keel's arms by change_file's candidates ([verify] candidates; "keel" is the configured 2): issue 37 wants
# N = 1, 2, 4 measured, with the wall time each extra solved exercise cost
CANDIDATES = {"keel-n1": 1, "keel": 2, "keel-n4": 4}
FIRST_PER_DIFFICULTY = 3
# Aider-AI/aider benchmark/prompts.py at 5dc9490bb: the addendum to the instructions (data, verbatim)
ADDENDUM = """
####

Use the above instructions to modify the supplied files: {file_list}
Don't change the names of existing functions or classes, as they may be referenced from other code like unit tests, etc.
Only use standard libraries, don't suggest installing any packages.
"""


@dataclass(frozen=True)
class Exercise:
    slug: str
    difficulty: int
    folder: Path
    solution: tuple[str, ...]
    tests: tuple[str, ...]

    def instructions(self) -> str:
        """introduction.md, instructions.md, instructions.append.md, as Aider's benchmark joins them."""
        docs = self.folder / ".docs"
        return "".join((docs / n).read_text() for n in ("introduction.md", "instructions.md", "instructions.append.md")
                       if (docs / n).exists())


# -- the track -----------------------------------------------------------------------------------------
def track_root(track: Path, cache: Path) -> tuple[Path, str]:
    """A folder holding the track's config.json and exercises/practice, and the commit it is from."""
    if (track / "exercises" / "practice").is_dir():
        commit = subprocess.run(["git", "-C", str(track), "rev-parse", "HEAD"], capture_output=True, text=True)
        return track, commit.stdout.strip() or "unknown"
    commit = subprocess.run(["git", "--git-dir", str(track), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    root = cache / f"track-{commit[:12]}"
    if not (root / "config.json").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        archive = subprocess.Popen(["git", "--git-dir", str(track), "archive", commit, "config.json",
                                    "exercises/practice"], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(root)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f"git archive of {track} failed")
    return root, commit


def exercises(root: Path) -> list[Exercise]:
    """The active practice exercises, less the held-back ones."""
    config = json.loads((root / "config.json").read_text())
    found = []
    for e in config["exercises"]["practice"]:
        if e.get("status") == "deprecated" or e["slug"] in HELD_BACK:
            continue
        folder = root / "exercises" / "practice" / e["slug"]
        files = json.loads((folder / ".meta" / "config.json").read_text())["files"]
        found.append(Exercise(e["slug"], int(e["difficulty"]), folder, tuple(files["solution"]), tuple(files["test"])))
    return found


def sample(pool: list[Exercise], n: int) -> list[Exercise]:
    """``n`` exercises across the difficulties (the module docstring says how), in run order."""
    strata: dict[int, list[Exercise]] = {}
    for e in sorted(pool, key=lambda e: hashlib.sha256(e.slug.encode()).hexdigest()):
        strata.setdefault(e.difficulty, []).append(e)
    take = {d: min(FIRST_PER_DIFFICULTY, len(s)) for d, s in strata.items()}
    left = min(n, len(pool)) - sum(take.values())
    if left > 0:
        room = {d: len(s) - take[d] for d, s in strata.items()}
        total = sum(room.values())
        shares = {d: left * r / total for d, r in room.items()}
        extra = {d: int(v) for d, v in shares.items()}
        for d in sorted(shares, key=lambda d: shares[d] - extra[d], reverse=True)[:left - sum(extra.values())]:
            extra[d] += 1
        take = {d: take[d] + min(extra[d], room[d]) for d in take}
    chosen = {d: strata[d][:k] for d, k in take.items()}
    order = []
    for i in range(max(take.values(), default=0)):   # the difficulties in turn
        order += [chosen[d][i] for d in sorted(chosen) if i < len(chosen[d])]
    return order


# -- one run -------------------------------------------------------------------------------------------
def lay_out(ex: Exercise, dest: Path, with_tests: bool) -> Path:
    """The exercise's starting files in a fresh git repository (keel's undo and diffs read it)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in ex.solution + (ex.tests if with_tests else ()):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ex.folder / name, dest / name)
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *command], cwd=dest,
                       check=True, capture_output=True)
    return dest


def grade(ex: Exercise, workspace: Path) -> tuple[bool, str]:
    """The original test files put back, then pytest: whether they pass, and the output's tail."""
    for name in ex.tests:
        shutil.copy(ex.folder / name, workspace / name)
    check = run_command(f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider", workspace, 180)
    return check.passed, check.detail[-600:]


def timed(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float, log: Path) -> tuple[int | None, bool]:
    """``cmd`` through keel's runner (its whole process tree ended past ``timeout``), output to ``log``."""
    code, stdout, stderr, timed_out = run_process(cmd, cwd, env, timeout)
    log.write_text(stdout + stderr)
    return code, timed_out


def run_keel(ex: Exercise, ws: Path, tmp: Path, args: argparse.Namespace, agent: str = "keel") -> dict[str, Any]:
    task = tmp / "task.md"
    task.write_text(ex.instructions() + ADDENDUM.format(file_list=" ".join(Path(f).name for f in ex.solution)))
    config_home = keel_config(tmp, args)
    with (config_home / "keel" / "config.toml").open("a") as fh:
        fh.write(f"\n[verify]\ncandidates = {CANDIDATES[agent]}\n")
    log = tmp / "session.jsonl"
    cmd = [sys.executable, "-m", "keel.cli.main", "run", "--task-file", str(task), "--cwd", str(ws),
           "--local", str(args.model), "--output-format", "json", "--log", str(log),
           "--max-seconds", f"{args.timeout:g}"]
    env = {**os.environ, "KEEL_HOME": str(tmp / "keel-home"), "XDG_CONFIG_HOME": str(config_home),
           "PYTHONPATH": str(args.keel_src)}
    stdout = tmp / "stdout.txt"
    code, killed = timed(cmd, ws, env, args.timeout + 60, stdout)   # model load and the last check run
    result = last_json_object(stdout.read_text(errors="replace")) or {}
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []
    usage = result.get("usage") or {}
    return {"status": "killed" if killed else result.get("status"), "stop_reason": result.get("stop_reason"),
            "steps": sum(1 for e in events if e.get("type") == "model_call"),
            "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
            "error": None if result else f"keel exited {code}: {stdout.read_text(errors='replace')[-800:]}"}


def aider_home(out: Path, context: int) -> Path:
    """A HOME for Aider whose model-info cache is fresh and knows the local model: no download."""
    home = out / "aider-home"
    cache = home / ".aider" / "caches"
    cache.mkdir(parents=True, exist_ok=True)
    info = {"max_input_tokens": context, "max_output_tokens": context // 2, "max_tokens": context // 2,
            "input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": "openai", "mode": "chat"}
    (cache / "model_prices_and_context_window.json").write_text(json.dumps({"openai/local-gguf": info}))
    return home


def run_aider(ex: Exercise, ws: Path, tmp: Path, args: argparse.Namespace, shown: bool) -> dict[str, Any]:
    tests = tmp / "tests"
    tests.mkdir()
    for name in ex.tests:
        shutil.copy(ex.folder / name, tests / Path(name).name)
    (tmp / "instructions.md").write_text(ex.instructions())
    result = tmp / "aider.json"
    cmd = [str(args.aider_python), str(BENCH / "_aider_driver.py"), "--workspace", str(ws), "--instructions",
           str(tmp / "instructions.md"), "--files", ",".join(ex.solution), "--tests", str(tests), "--result",
           str(result), "--test-command", json.dumps([sys.executable, "-m", "pytest"]), *(["--read"] if shown else [])]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AIDER_", "PYTHON"))},
           "HOME": str(aider_home(args.out, args.context)), "OPENAI_API_KEY": "local", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONDONTWRITEBYTECODE": "1"}
    # A server of its own for each run: llama_cpp.server finishes a request whose client was ended, so
    # one shared across runs made the next run wait for the last one's reply.
    with llama_server(args, ("--cache", "true", "--cache_type", "ram")) as base_url:   # Aider's prompt cache
        env["OPENAI_API_BASE"] = base_url
        started = time.monotonic()
        code, killed = timed(cmd, ws, env, args.timeout, tmp / "stdout.txt")
        elapsed = time.monotonic() - started
    got = json.loads(result.read_text()) if result.exists() else {}
    tries = got.get("tests_outcomes") or []
    error = None if got or killed else f"aider exited {code}: {(tmp / 'stdout.txt').read_text(errors='replace')[-800:]}"
    return {"status": "killed" if killed else "ended", "first_try": bool(tries and tries[0]), "tries": tries,
            "wall_s": round(elapsed, 1),
            "prompt_tokens": got.get("prompt_tokens"), "completion_tokens": got.get("completion_tokens"),
            "malformed": got.get("malformed"), "error": error}


def keel_commit(src: Path) -> str:
    """The commit keel runs from: its checkout's HEAD, or the KEEL_COMMIT file beside an archive of it."""
    marker = src / "KEEL_COMMIT"
    if marker.exists():
        return marker.read_text().strip()
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True)
    return head.stdout.strip() or "unknown"


def run_one(ex: Exercise, agent: str, args: argparse.Namespace) -> dict[str, Any]:
    tmp = args.out / "runs" / f"{ex.slug}.{agent}"   # the same folder each time: its path is in the prompts
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ws = lay_out(ex, tmp / ex.slug, with_tests=agent in CANDIDATES)
    started = time.monotonic()
    got = (run_keel(ex, ws, tmp, args, agent) if agent in CANDIDATES else
           run_aider(ex, ws, tmp, args, agent == "aider-shown"))
    wall = round(time.monotonic() - started, 1)
    passed, tail = grade(ex, ws)
    row = {"exercise": ex.slug, "difficulty": ex.difficulty, "agent": agent, "solved": passed, "wall_s": wall,
           **got,   # Aider's wall time is its own process's: the server's start is not counted
           "false_done": agent in CANDIDATES and got.get("status") == "complete" and not passed,
           "test_tail": "" if passed else tail, "timeout_s": args.timeout, "threads": args.threads,
           "track_commit": args.track_commit, "keel_commit": keel_commit(args.keel_src), "load": os.getloadavg()[0]}
    if not args.keep:
        shutil.rmtree(ws, ignore_errors=True)
    return row


# -- the batch and its report ----------------------------------------------------------------------------
def done_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            rows.append(json.loads(line))
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """Solved counts per arm over the exercises every arm has finished, with keel's ratio to each Aider arm."""
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if not r.get("error"):
            by.setdefault(r["agent"], {})[r["exercise"]] = r
    agents = [a for a in AGENTS if a in by]
    common = set.intersection(*(set(by[a]) for a in agents)) if agents else set()
    lines = [f"{len(common)} exercises finished by every arm ({', '.join(agents)})", "",
             "| arm | solved | share | tests passed | first try | false done | median wall per solved (s) | by difficulty |",
             "|---|---|---|---|---|---|---|---|"]
    solved = {}
    for a in agents:
        rs = [by[a][e] for e in sorted(common)]
        ok = [r for r in rs if r["solved"]]
        solved[a] = len(ok)
        levels = sorted({r["difficulty"] for r in rs})
        per = " ".join(f"d{d}:{sum(r['solved'] for r in rs if r['difficulty'] == d)}/"
                       f"{sum(1 for r in rs if r['difficulty'] == d)}" for d in levels)
        first = str(sum(1 for r in rs if r.get("first_try"))) if a not in CANDIDATES else "-"
        false = str(sum(1 for r in rs if r.get("false_done"))) if a in CANDIDATES else "-"
        median = round(statistics.median(r["wall_s"] for r in ok), 1) if ok else "-"
        share = f"{len(ok) / len(rs):.1%}" if rs else "-"
        tests = f"{statistics.mean(passed_share(r) for r in rs):.0%}" if rs else "-"
        lines.append(f"| {a} | {len(ok)}/{len(rs)} | {share} | {tests} | {first} | {false} | {median} | {per} |")
    lines.append("")
    for peer in ("aider-hidden", "aider-shown"):
        if "keel" in solved and peer in solved:
            ratio = (f"{solved['keel'] / solved[peer]:.2f}x" if solved[peer] else
                     "no ratio: the peer solved none" if solved["keel"] else "no ratio: neither solved any")
            lines.append(f"keel / {peer}: {ratio} (target: at least 1.5x)")
    lines += extra_solved({a: [by[a][e] for e in sorted(common)] for a in agents if a in CANDIDATES})
    # a batch resumed at a newer keel leaves rows of several commits in one arm: say which, and how many
    commits = Counter(by[a][e].get("keel_commit", "?")[:7] for a in agents if a in CANDIDATES for e in common)
    if commits:
        lines.append("keel's rows by commit: " + ", ".join(f"{c} ({n})" for c, n in commits.most_common()))
    return "\n".join(lines)


def passed_share(row: dict[str, Any]) -> float:
    """The share of an exercise's tests the arm left passing (1.0 solved; 0.0 where the tail has no
    counts, e.g. a test file that did not load): a partial score, for a sample too small for counts
    of solved exercises to tell arms apart."""
    if row["solved"]:
        return 1.0
    counts = run_counts(row.get("test_tail") or "")
    total = counts.passed + counts.failed if counts is not None else 0
    return counts.passed / total if counts is not None and total else 0.0


def extra_solved(arms: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each candidates arm against the one with fewer candidates below it: the exercises it solved more,
    and the wall time (summed over the same exercises) each extra one cost."""
    lines, ordered = [], sorted(arms, key=CANDIDATES.__getitem__)
    for low, high in zip(ordered, ordered[1:], strict=False):
        gained = sum(r["solved"] for r in arms[high]) - sum(r["solved"] for r in arms[low])
        spent = sum(r["wall_s"] for r in arms[high]) - sum(r["wall_s"] for r in arms[low])
        per = f"{spent / gained:.0f} s per extra solved exercise" if gained > 0 else "no extra exercise solved"
        lines.append(f"candidates {CANDIDATES[low]} -> {CANDIDATES[high]}: {gained:+d} solved, "
                     f"{spent:+.0f} s of wall time: {per}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--track", type=Path, help="a copy of the exercism/python repository (checkout or git dir)")
    p.add_argument("--model", type=Path, help="the GGUF file")
    p.add_argument("--out", type=Path, required=True, help="results.jsonl, logs and workspaces; resumable")
    p.add_argument("--agents", default=",".join(AGENTS))
    p.add_argument("--sample", type=int, default=45, help="exercises, across the difficulties (45)")
    p.add_argument("--only", default="", help="comma-separated slugs instead of the sample")
    p.add_argument("--timeout", type=float, default=300.0, help="wall time per exercise and arm, seconds (300)")
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--keel-src", type=Path, default=ROOT, help="the keel source tree keel runs from")
    p.add_argument("--aider-python", type=Path, default=Path("/work/venvs/aider/bin/python"))
    p.add_argument("--keep", action="store_true", help="keep the workspaces")
    p.add_argument("--list", action="store_true", help="print the sample and stop")
    p.add_argument("--report", action="store_true", help="print the report of --out and stop")
    args = p.parse_args(argv)
    exit_on_term()
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    if args.report:   # over the arms --agents names (all by default): each pair has its own common exercises
        print(report([r for r in done_rows(results) if r["agent"] in args.agents.split(",")]))
        return 0
    if args.track is None or (args.model is None and not args.list):
        p.error("--track and --model are needed to run")
    root, args.track_commit = track_root(args.track.resolve(), args.out)
    pool = exercises(root)
    chosen = ([e for e in pool if e.slug in set(args.only.split(","))] if args.only else sample(pool, args.sample))
    if args.list:
        for e in chosen:
            print(f"{e.difficulty} {e.slug}")
        print(f"{len(chosen)} of {len(pool)} (track {args.track_commit[:12]})")
        return 0
    agents = [a for a in args.agents.split(",") if a]
    if set(agents) - set(AGENTS):
        p.error(f"unknown agents; choose from {AGENTS}")
    done = {(r["exercise"], r["agent"]) for r in done_rows(results) if not r.get("error")}
    for i, ex in enumerate(chosen):
        turn = agents[i % len(agents):] + agents[:i % len(agents)]   # who goes first rotates
        for agent in turn:
            if (ex.slug, agent) in done:
                continue
            row = run_one(ex, agent, args)
            with results.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(json.dumps({k: row[k] for k in ("exercise", "difficulty", "agent", "solved", "wall_s",
                                                  "status", "error")}), flush=True)
    print(report(done_rows(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
