"""bench/suite_batch.py keeps a real-model batch across machines: each finished case's record (and its
events, gzipped) is copied into the checkout as it lands, and a fresh machine's ``keel eval`` output
folder is seeded from there, so the same command goes on where the last machine stopped."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import suite_batch  # noqa: E402

from keel.eval.suite import finished_keys  # noqa: E402


def _record(case: str, outcome: str, arm_dir: Path) -> None:
    key = f"{case}__keel__r1"
    (arm_dir / "results").mkdir(parents=True, exist_ok=True)
    (arm_dir / "logs").mkdir(parents=True, exist_ok=True)
    record = {"key": key, "case": {"id": case}, "agent": "keel", "outcome": outcome, "stop_reason": "complete",
              "claimed_complete": outcome == "success", "metrics": {"steps": 2, "wall_s": 30.0}}
    (arm_dir / "results" / f"{key}.json").write_text(json.dumps(record))
    (arm_dir / "logs" / f"{key}.jsonl").write_text('{"type": "session_start"}\n')


def test_records_go_into_the_checkout_as_they_land_and_seed_a_fresh_machine(tmp_path):
    out, saved = tmp_path / "machine-1", tmp_path / "saved"
    _record("py-off-by-one", "success", out / "configured")
    (out / "configured" / "run.json").write_text("{}")
    assert suite_batch.sync(out, saved, seed=False) == 2
    log = saved / "configured" / "logs" / "py-off-by-one__keel__r1.jsonl.gz"
    assert gzip.decompress(log.read_bytes()).decode() == '{"type": "session_start"}\n'
    _record("py-mutable-default", "failure", out / "configured")
    assert suite_batch.sync(out, saved, seed=False) == 1          # only what is new

    fresh = tmp_path / "machine-2"
    assert suite_batch.sync(fresh, saved, seed=True) == 3
    assert sorted(p.name for p in (fresh / "configured" / "results").iterdir()) == [
        "py-mutable-default__keel__r1.json", "py-off-by-one__keel__r1.json"]
    # keel eval resumes from exactly these
    assert finished_keys(fresh / "configured") == {"py-off-by-one__keel__r1", "py-mutable-default__keel__r1"}


def test_the_report_reads_what_is_saved(tmp_path):
    saved = tmp_path / "saved"
    _record("py-off-by-one", "success", saved / "configured")
    _record("py-off-by-one", "failure", saved / "off")
    table = suite_batch.report(saved, "configured,off")
    assert "records configured 1, off 1" in table
    assert "py-off-by-one" in table          # the flip between the arms is named


def test_a_commit_that_does_not_exist_is_a_clear_error():
    ran = subprocess.run([sys.executable, str(BENCH / "suite_batch.py"), "--commit", "nosuchrev", "--report"],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode != 0 and "nosuchrev: not a commit" in ran.stderr and "Traceback" not in ran.stderr
