"""The eval suite on the real small model, at one fixed commit, resumable across machines (issue 36).

    python bench/suite_batch.py --commit ecd84c2 --model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    python bench/suite_batch.py --commit ecd84c2 --report      # the per-assist table so far

A batch of the whole suite in two arms (assists as configured, all off) takes about five hours on two
cores: longer than the machine it starts on may live. So each finished case's record is copied, as
it lands, into ``bench/results/suite-<commit>/<arm>/`` of this checkout (a few KB each, committed with
the session's work), and a run on a fresh machine seeds ``keel eval``'s output folder from there, so
``keel eval`` (which resumes an output folder) goes on from the first case without a record. The
events of each run are kept gzipped beside the records (``logs/``), so a flip can be read from them
later.

keel runs from a copy of the commit's tree (``git archive``; never this working tree, which may
change while the batch runs), under ``--work`` (default ``~/.cache/keel-bench``). The settings are the
ones every earlier table in docs/local.md used: 12 steps, 420 s a run, the cases of ``evals/`` at that
commit, the arms ``configured,off`` one after the other in the same folders.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from real_engine import exit_on_term  # noqa: E402

from keel.eval.arms import assist_tables, parse_arms  # noqa: E402
from keel.eval.suite import load_records  # noqa: E402


def commit_of(rev: str) -> str:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"suite_batch: {rev}: not a commit of {REPO}")
    return out.stdout.strip()


def tree_at(commit: str, work: Path) -> Path:
    """The commit's files under ``work`` (made once; a half-made copy is made again)."""
    src = work / f"src-{commit[:12]}"
    if (src / ".complete").exists():
        return src
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(src)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"suite_batch: git archive {commit} failed")
    (src / ".complete").write_text(commit + "\n")
    return src


def sync(out: Path, saved: Path, *, seed: bool) -> int:
    """Copy records (and gzipped logs) one way: ``saved`` -> ``out`` when seeding, else back. Returns how
    many were copied."""
    copied = 0
    frm, to = (saved, out) if seed else (out, saved)
    for record in sorted(frm.glob("*/results/*.json")) + sorted(frm.glob("*/run.json")):
        target = to / record.relative_to(frm)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(record, target)
            copied += 1
    if not seed:
        for log in sorted(out.glob("*/logs/*.jsonl")):
            target = saved / log.relative_to(out).with_suffix(".jsonl.gz")
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(gzip.compress(log.read_bytes(), mtime=0))
    return copied


def report(saved: Path, arms: str) -> str:
    """The per-assist table (keel eval's own) over the records saved so far, arm by arm."""
    by_arm = {arm.label: load_records(saved / arm.label) for arm in parse_arms(arms)}
    counts = ", ".join(f"{label} {len(records)}" for label, records in by_arm.items())
    return f"{saved}: records {counts}\n\n{assist_tables(by_arm)}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--commit", required=True, help="the commit whose keel and cases run")
    p.add_argument("--model", type=Path, help="the GGUF (default: keel's data dir/models/, the 1.5B)")
    p.add_argument("--arms", default="configured,off")
    p.add_argument("--work", type=Path, default=Path.home() / ".cache" / "keel-bench")
    p.add_argument("--report", action="store_true", help="print the table of what is saved, run nothing")
    p.add_argument("cases", nargs="*", help="case ids or tag:NAME (default: the whole suite)")
    args = p.parse_args(argv)
    commit = commit_of(args.commit)
    saved = HERE / "results" / f"suite-{commit[:7]}"
    if args.report:
        print(report(saved, args.arms))
        return 0
    src = tree_at(commit, args.work)
    out = args.work / f"suite-{commit[:12]}"
    sync(out, saved, seed=True)
    env = dict(os.environ, PYTHONPATH=str(src))
    model = args.model or Path(subprocess.run(
        [sys.executable, str(src / "scripts" / "fetch_test_model.py"), "--model", "1.5b"],
        capture_output=True, text=True, env=env, check=True).stdout.strip())
    command = [sys.executable, "-m", "keel.cli.main", "eval", "--local", str(model), "--arms", args.arms,
               "--max-steps", "12", "--timeout", "420", "--out", str(out), "--cases-dir", str(src / "evals"),
               *args.cases]
    exit_on_term()
    proc = subprocess.Popen(command, cwd=src, env=env)
    try:
        while proc.poll() is None:
            time.sleep(20)
            sync(out, saved, seed=False)
    finally:   # keel eval saves each finished case and says how to resume; the records made so far are kept
        if proc.poll() is None:   # SIGTERM: started in the background, keel eval inherits SIGINT ignored
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        sync(out, saved, seed=False)
    print(f"suite_batch: records in {saved.relative_to(REPO)}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
