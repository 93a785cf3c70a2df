"""The REPL's approvals and the gate's own time, in a real pseudo-terminal against the scripted engine
(real HTTP): the change is shown before the question, one key answers it, Esc stops the run (recorded
as a cancel), and the baseline checks run after the answer, shown and timed apart from the edit."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pexpect
from conftest import CALC, call, git
from test_repl import PROMPT, ctrl_d_exits, spawn

from keel.testing.server import ScriptedEngineServer

SLOW_CHECK = "python3 -c 'import time; time.sleep(1.5); import calc'"
FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")


def _slow_repo(calc_repo: Path) -> Path:
    (calc_repo / ".keel").mkdir()
    (calc_repo / ".keel" / "config.toml").write_text(
        f'[[verify.plan]]\ncategory = "test"\ncommand = "{SLOW_CHECK}"\n'.replace("'", "'"))
    git(calc_repo, "add", "-A")
    git(calc_repo, "commit", "-qm", "pin a slow check")
    return calc_repo


def _events(keel_env: dict[str, str]) -> list[dict]:
    logs = sorted((Path(keel_env["KEEL_HOME"]) / "sessions").glob("*.jsonl"))
    return [json.loads(line) for line in logs[-1].read_text().splitlines()]


def test_the_question_comes_before_the_baseline_which_is_shown_and_timed_apart(calc_repo, keel_env):
    repo = _slow_repo(calc_repo)
    script = [{"tool_calls": [FIX]}, {"content": "Fixed: add adds."}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, repo, keel_env)
        child.sendline("fix add")
        child.expect("keel wants to edit calc.py")
        assert "baseline" not in child.before        # nobody waited on the checks to be asked
        child.expect(r"\+    return a \+ b")
        child.expect(r"\[y\] yes, once")
        time.sleep(1.5)                               # the person takes their time: not the edit's
        child.send("y")
        child.expect(r"baseline: python3 -c [^\n]*✓[^\n]*\((\d+\.\d) s\)")
        assert float(child.match.group(1)) >= 1.5
        child.expect(r"edit_file calc.py[^\n]*\((\d+) ms\)")   # the edit's own time: not the checks', not the wait
        assert int(child.match.group(1)) < 1000
        child.expect(r"verify: python3 -c [^\n]*→ passed[^\n]*\((\d+\.\d) s\)")
        child.expect("■ complete")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
    kinds = [e["type"] for e in _events(keel_env)]
    assert kinds.index("approval") < kinds.index("checks_start") < kinds.index("checks_before") \
        < kinds.index("tool_call")


def test_esc_at_the_question_stops_the_run_and_is_recorded_as_a_cancel(calc_repo, keel_env):
    script = [{"tool_calls": [FIX]}, {"content": "never asked for"}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, calc_repo, keel_env)
        child.sendline("fix add")
        child.expect("keel wants to edit calc.py")
        child.expect("Esc or Ctrl-C: stop the run")
        child.send("\x1b")
        child.expect("■ interrupted")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
        assert len(server.requests) == 1
    assert (calc_repo / "calc.py").read_text() == CALC
    events = _events(keel_env)
    approval = next(e for e in events if e["type"] == "approval")
    assert approval["cancelled"] and not approval["allowed"]
    edit = next(e for e in events if e["type"] == "tool_call")
    assert edit["result_preview"].startswith("Interrupted by the user") and not re.search("refused", edit["result_preview"])


def test_n_refuses_and_the_model_hears_it(calc_repo, keel_env):
    script = [{"tool_calls": [FIX]}, {"content": "Understood, calc.py stays as it is."}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, calc_repo, keel_env)
        child.sendline("fix add")
        child.expect(r"\[n\] no")
        child.send("n")
        child.expect("calc.py stays as it is")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
        told = server.requests[1]["messages"][-1]["content"]
    assert "refused by the user" in told and (calc_repo / "calc.py").read_text() == CALC
    assert pexpect   # the module drives the pty


def test_keel_run_interactive_shows_the_diff_before_the_question(calc_repo, keel_env):
    script = [{"tool_calls": [FIX]}, {"content": "Fixed."}]
    with ScriptedEngineServer(script) as server:
        child = pexpect.spawn(sys.executable, ["-m", "keel.cli.main", "run", "fix add", "--cwd", str(calc_repo),
                                               "--approval", "interactive", "--max-steps", "2",
                                               "--base-url", server.base_url, "--model", "scripted"],
                              env={**keel_env, "PROMPT_TOOLKIT_NO_CPR": "1"}, encoding="utf-8", timeout=60)
        child.expect("keel wants to edit calc.py")
        child.expect(r"│ \+    return a \+ b")
        child.expect(r"\[y\] yes, once")
        child.expect(">")
        assert "return a - b" in (calc_repo / "calc.py").read_text()
        child.sendline("y")
        child.expect(pexpect.EOF)
        child.close()
    assert "return a + b" in (calc_repo / "calc.py").read_text()   # approved after it was seen
