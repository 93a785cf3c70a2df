"""`keel eval` keeps "done but not claimed" apart from success (issue 22): a run whose acceptance passes
but that stopped at a limit (here limit:retries) told its user the task is not done, so it is not a
success. Real `keel eval` and `keel run` subprocesses, a scripted engine over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from keel.eval.metrics import aggregate, outcome
from keel.eval.report import report_html, summary_markdown

FIX = {"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b",
                                                          "new_text": "return a + b"}}]}
DOWN = {"error": {"status": 500, "retry_after": 0}}


def make_case(root: Path) -> Path:
    case = root / "fixed-then-down"
    (case / "repo").mkdir(parents=True)
    (case / "repo" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (case / "task.md").write_text("Fix add() in calc.py: it must return a + b.\n")
    (case / "case.toml").write_text('title = "fixed, then the engine went down"\ncategory = "bugfix"\n'
                                    'size = "small"\nlanguage = "python"\n\n[acceptance]\n'
                                    "commands = [\"python -c 'from calc import add; assert add(2, 3) == 5'\"]\n")
    (case / "script.jsonl").write_text("\n".join(json.dumps(s) for s in [FIX] + [DOWN] * 4) + "\n")
    return root


def test_a_run_that_stopped_at_limit_retries_with_the_acceptance_passing_is_done_but_not_claimed(tmp_path):
    cases = make_case(tmp_path / "cases")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEL_", "OPENAI_"))}
    env.update(KEEL_HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "keel.cli.main", "eval", "--engine", "scripted", "--cases-dir",
                           str(cases), "--out", str(out)], env=env, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stderr       # not every run succeeded
    record = json.loads(next((out / "results").glob("*.json")).read_text())
    assert (record["stop_reason"], record["passed"], record["outcome"]) == ("limit:retries", True, "done_unclaimed")
    summary = (out / "summary.md").read_text()
    assert "| agent | runs | success | done but not claimed | false done |" in summary
    assert "| keel | 1 | 0 (0%) | 1 | 0 |" in summary
    assert "| fixed-then-down | bugfix | small | ✓? (" in summary
    assert "✓? done but not claimed" in summary
    html = (out / "report.html").read_text()
    assert "<td>done but not claimed</td>" in html and "<td>limit:retries</td>" in html
    assert "unclaimed" in proc.stderr   # the line printed as the run lands


def test_outcome_words_and_aggregate():
    assert outcome("incomplete", passed=True) == "done_unclaimed"
    assert outcome("complete", passed=True) == "success"
    rows = [{"case": {"id": "a"}, "agent": "keel", "repeat": 1, "outcome": "done_unclaimed",
             "stop_reason": "limit:retries", "metrics": {}},
            {"case": {"id": "b"}, "agent": "keel", "repeat": 1, "outcome": "success", "stop_reason": "complete",
             "metrics": {}}]
    agg = aggregate(rows)
    assert (agg["success"], agg["done_unclaimed"], agg["success_rate"]) == (1, 1, 0.5)
    assert "✓?" in summary_markdown(rows) and "done but not claimed" in report_html(rows)
