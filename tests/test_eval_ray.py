"""Cases as Ray tasks on a local Ray instance: the same records as the local pool, written by the driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keel.eval.cases import load_cases
from keel.eval.execute import JobSpec
from keel.eval.suite import plan_jobs, run_suite

FIXTURES = Path(__file__).parent / "fixtures" / "evals"


def test_cases_run_as_ray_tasks_on_a_local_instance(tmp_path, monkeypatch):
    pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[ray]')")
    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "keel-home"))
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    cases = load_cases(FIXTURES, ["add-fn", "false-done"])
    jobs = plan_jobs(cases, JobSpec(case_id="", case_dir="", engine="scripted"), repeat=1)
    landed = []
    ran = run_suite(jobs, tmp_path / "out", workers=2, ray_address="local", on_done=landed.append)
    assert [j.key for j in ran] == ["add-fn__keel__r1", "false-done__keel__r1"]
    outcomes = {o.record["key"]: o.record["outcome"] for o in landed}
    assert outcomes == {"add-fn__keel__r1": "success", "false-done__keel__r1": "false_done"}
    saved = json.loads((tmp_path / "out" / "results" / "add-fn__keel__r1.json").read_text())
    assert saved["metrics"]["steps"] == 4 and saved["grade"]["passed"] is True
    # the event log came back from the worker with the result
    assert (tmp_path / "out" / saved["log"]).read_text().startswith('{"type": "session_start"')


def test_ray_auto_with_no_cluster_is_one_line_and_exit_2(tmp_path, run_keel, keel_env):
    pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[ray]')")
    keel_env.update(RAY_TMPDIR=str(tmp_path / "ray"), RAY_USAGE_STATS_ENABLED="0")   # no cluster is found here
    keel_env.pop("RAY_ADDRESS", None)
    r = run_keel("eval", "add-fn", "--cases-dir", str(FIXTURES), "--engine", "scripted", "--ray", "auto",
                 "--out", str(tmp_path / "out"))
    assert r.code == 2, r.stderr
    assert "Traceback" not in r.stderr and "ConnectionError" not in r.stderr
    [said] = [line for line in r.stderr.splitlines() if "--ray auto" in line]
    assert "no Ray cluster could be reached" in said and "--ray local" in said
