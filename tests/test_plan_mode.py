"""Plan mode end to end: the real `keel run --plan` against a scripted engine over HTTP, then the
approval (`--resume SESSION --approve-plan`, or an edited --plan-file) carried to a verified finish."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import CALC, call

from keel.ext.plan import plan_todos
from keel.testing.server import ScriptedEngineServer
from keel.tools.readonly import is_read_only_command

PLAN = ("Plan:\n1. Change `add` in calc.py to return a + b instead of a - b\n"
        "   - keep the signature\n2. Run python -m pytest -q to verify\n")


def _plan_script() -> list[dict]:
    return [
        {"content": "Looking first.", "tool_calls": [call("read_file", path="calc.py"),
                                                     call("run_shell", command="git log --oneline")]},
        {"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b"),
                        call("run_shell", command="python -m pytest -q"),
                        call("run_shell", command="touch notes.txt")]},
        {"content": PLAN},
    ]


def _git_status(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout


def _plan_run(run_keel, repo: Path):
    with ScriptedEngineServer(_plan_script()) as server:
        r = run_keel("run", "fix the failing test", "--plan", "--cwd", str(repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json")
        requests = server.requests
    return r, requests


def test_headless_plan_run_stops_with_the_plan_and_touches_nothing(calc_repo, run_keel):
    r, requests = _plan_run(run_keel, calc_repo)
    assert r.code == 3, r.stderr
    res = r.result
    assert (res["status"], res["stop_reason"]) == ("incomplete", "awaiting_plan_approval")
    assert res["plan"] == PLAN.strip() and res["files_changed"] == []
    # nothing in the workspace changed: no edit, no test caches, no notes.txt
    assert (calc_repo / "calc.py").read_text() == CALC
    assert _git_status(calc_repo) == ""
    saved = Path(res["log"]).with_suffix("") / "plan.md"
    assert saved.read_text() == PLAN.strip() + "\n"
    # the model was told it is planning, and each refusal says "plan mode"
    assert "PLAN MODE" in requests[0]["messages"][1]["content"]
    refusals = [m["content"] for m in requests[2]["messages"] if m["role"] == "tool"][-3:]
    assert all("plan mode" in text for text in refusals), refusals
    reads = [m["content"] for m in requests[1]["messages"] if m["role"] == "tool"]
    assert "return a - b" in reads[0] and "init" in reads[1]  # read-only tools and commands ran
    kinds = [e["type"] for e in r.events()]
    assert "plan_saved" in kinds and "verification" not in kinds


def test_approving_the_plan_continues_the_session_to_a_verified_finish(calc_repo, run_keel):
    r, _ = _plan_run(run_keel, calc_repo)
    session = r.result["session_id"]
    # resuming without an approval is refused: the plan is for a person to accept first
    refused = run_keel("run", "--resume", session, "--base-url", "http://127.0.0.1:9/v1", "--model", "scripted",
                       "--output-format", "json")
    assert refused.code == 2 and "awaiting approval" in refused.stderr
    script = [
        {"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
        {"content": "All done."},  # a claim with open todos is pushed back
        {"tool_calls": [call("run_shell", command="python -m pytest -q")]},
        {"tool_calls": [call("todo_write", todos=[
            {"content": t["content"], "status": "done"} for t in plan_todos(PLAN)])]},
        {"tool_calls": [call("finish", summary="Fixed add; pytest passes.")]},
    ]
    with ScriptedEngineServer(script) as server:
        done = run_keel("run", "--resume", session, "--approve-plan", "--base-url", server.base_url,
                        "--model", "scripted", "--output-format", "json")
        requests = server.requests
    assert done.code == 0, done.stderr
    res = done.result
    assert (res["status"], res["stop_reason"]) == ("complete", "complete")
    assert res["session_id"] == session and res["verification"]["status"] == "passed"
    assert (calc_repo / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    first = requests[0]["messages"]
    assert "approved this plan" in first[-1]["content"] and PLAN.strip() in first[-1]["content"]
    assert any("return a - b" in (m.get("content") or "") for m in first if m["role"] == "tool")  # exploration kept
    assert "unfinished_todos" in [e.get("pushback_kind") for e in done.events() if e["type"] == "decision"]
    assert (Path(res["log"]).with_suffix("") / "plan-approved.md").is_file()


def test_an_edited_plan_file_seeds_a_fresh_run_with_its_steps_as_todos(calc_repo, run_keel, tmp_path):
    edited = tmp_path / "edited.md"
    edited.write_text("1. Fix add in calc.py\n2. Run the tests\n")
    script = [
        {"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b"),
                        call("run_shell", command="python -m pytest -q")]},
        {"tool_calls": [call("finish", summary="done")]},  # todos still open: pushed back
        {"tool_calls": [call("todo_write", todos=[{"content": "Fix add in calc.py", "status": "done"},
                                                  {"content": "Run the tests", "status": "done"}])]},
        {"tool_calls": [call("finish", summary="Fixed add; pytest passes.")]},
    ]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "fix the failing test", "--plan-file", str(edited), "--cwd", str(calc_repo),
                     "--base-url", server.base_url, "--model", "scripted", "--output-format", "json",
                     "--verify", "off")  # the gate is proven in the approval test above
    assert r.code == 0, r.stderr
    assert r.result["stop_reason"] == "complete" and r.result["steps"] == 4


def test_plan_flag_usage_errors(calc_repo, run_keel):
    r = run_keel("run", "x", "--plan", "--plan-file", "p.md", "--cwd", str(calc_repo), "--base-url",
                 "http://127.0.0.1:9/v1", "--model", "m")
    assert r.code == 2 and "one or the other" in r.stderr
    r = run_keel("run", "x", "--approve-plan", "--cwd", str(calc_repo), "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m")
    assert r.code == 2 and "--resume" in r.stderr
    r = run_keel("run", "x", "--plan-file", str(calc_repo / "missing.md"), "--cwd", str(calc_repo),
                 "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert r.code == 2 and "cannot read the plan file" in r.stderr


def test_read_only_commands_and_plan_steps():
    ws = Path("/tmp")
    assert is_read_only_command("git log --oneline | head", ws)
    assert not is_read_only_command("python -m pytest -q", ws)  # writes caches: not while planning
    assert not is_read_only_command("sed -i s/a/b/ calc.py", ws)
    assert not is_read_only_command("find . -delete", ws)
    assert [t["content"] for t in plan_todos(PLAN)] == [
        "Change add in calc.py to return a + b instead of a - b", "Run python -m pytest -q to verify"]
    assert plan_todos("Just fix it.") == [{"content": "Carry out the approved plan", "status": "pending"}]


def test_text_output_says_how_to_approve(calc_repo, run_keel):
    with ScriptedEngineServer([{"tool_calls": [call("read_file", path="calc.py")]}, {"content": PLAN}]) as server:
        r = run_keel("run", "fix it", "--plan", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted")
    assert r.code == 3
    assert "Change `add` in calc.py" in r.stdout and "awaiting_plan_approval" in r.stdout
    assert "--approve-plan" in r.stderr and "plan.md" in r.stderr


def test_an_edited_plan_replaces_the_sessions_plan_on_resume(calc_repo, run_keel, tmp_path):
    r, _ = _plan_run(run_keel, calc_repo)
    edited = tmp_path / "mine.md"
    edited.write_text("- Fix add in calc.py only\n")
    script = [{"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b"),
                              call("run_shell", command="python -m pytest -q"),
                              call("todo_write", todos=[{"content": "Fix add in calc.py only", "status": "done"}])]},
              {"tool_calls": [call("finish", summary="Fixed add.")]}]
    with ScriptedEngineServer(script) as server:
        done = run_keel("run", "--resume", r.result["session_id"], "--plan-file", str(edited), "--base-url",
                        server.base_url, "--model", "scripted", "--output-format", "json", "--verify", "off")
        approval = server.requests[0]["messages"][-1]["content"]
    assert done.code == 0, done.stderr
    assert "Fix add in calc.py only" in approval and "Run python -m pytest" not in approval
    saved = Path(done.result["log"]).with_suffix("")
    assert (saved / "plan-approved.md").read_text() == "- Fix add in calc.py only\n"
    assert (saved / "plan.md").read_text() == PLAN.strip() + "\n"  # the model's plan stays as it was
