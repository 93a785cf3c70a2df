"""mini-swe-agent on the same case, engine (the scripted server, through litellm's openai/<model> at our
base URL), step limit and grading as keel; both land side by side in one report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "evals"


def test_keel_and_mini_swe_agent_on_the_same_case_side_by_side(tmp_path):
    pytest.importorskip("minisweagent", reason="mini-swe-agent is not installed (pip install -e '.[peer]')")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEL_", "OPENAI_", "MSWEA_"))}
    env.update(KEEL_HOME=str(tmp_path / "keel-home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "keel.cli.main", "eval", "--engine", "scripted",
                           "--cases-dir", str(FIXTURES), "fix-sub", "--agent", "keel", "--agent", "mini-swe-agent",
                           "--workers", "2", "--max-steps", "10", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    peer = json.loads((out / "results" / "fix-sub__mini-swe-agent__r1.json").read_text())
    assert (peer["outcome"], peer["status"], peer["stop_reason"]) == ("success", "complete", "complete")
    assert peer["grade"]["changed_files"] == ["mathx.py"]
    m = peer["metrics"]
    # 4 scripted replies; the second has no tool call, which mini-swe-agent answers with a format error
    assert (m["steps"], m["tool_calls"], m["idle_turns"], m["pushbacks"]) == (4, 3, 1, {"format_error": 1})
    assert m["prompt_tokens"] > 0 and m["cached_tokens"] > 0
    settings = json.loads((out / "run.json").read_text())["agents"]
    assert settings["mini-swe-agent"]["max_steps"] == settings["keel"]["max_steps"] == 10
    summary = (out / "summary.md").read_text()
    assert "| fix-sub | bugfix | small | ✓ (4 steps) | ✓ (4 steps) |" in summary
    assert 'id="chart-peer"' in (out / "report.html").read_text()
