"""The approval modes do what their names say, through the real CLI, policy and sandbox:
auto-edit edits unasked and still asks before an ask-class command; full-auto runs ask-class
commands unasked, and only where an OS tier confines them; a machine without one is told so."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pexpect
import pytest
from conftest import call

from keel.policy.sandbox import detect_sandbox
from keel.testing.server import ScriptedEngineServer

# `install` asks under every OS tier (unlike `touch`, a workspace write that a confining tier allows).
MAKE_MARKER = "install -m 644 /dev/null marker.txt"
FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
FINISH = call("finish", summary="Fixed add and made the marker.")


def script() -> list[dict]:
    return [{"tool_calls": [FIX]}, {"tool_calls": [call("run_shell", command=MAKE_MARKER)]},
            {"tool_calls": [FINISH]}]


def run_args(server: ScriptedEngineServer, repo: Path, approval: str, *extra: str) -> list[str]:
    return ["run", "fix add and make a marker", "--cwd", str(repo), "--base-url", server.base_url,
            "--model", "scripted", "--approval", approval, "--verify", "off", *extra]


def sandbox_off(keel_env: dict[str, str], extra: str = "") -> None:
    """The user's config turns the OS sandbox off: commands get no confining tier."""
    config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[shell]\nsandbox = "off"\n{extra}')


def test_auto_edit_edits_unasked_and_asks_before_a_command_in_a_terminal(calc_repo, keel_env):
    with ScriptedEngineServer(script()) as server:
        child = pexpect.spawn(sys.executable, ["-m", "keel.cli.main", *run_args(server, calc_repo, "auto-edit")],
                              env=keel_env, encoding="utf-8", timeout=60, dimensions=(40, 200))
        child.expect("keel wants to run: " + re.escape(MAKE_MARKER))
        before = child.before
        assert "return a + b" in (calc_repo / "calc.py").read_text()   # the edit went ahead ...
        assert "keel wants to edit" not in before                       # ... and nobody was asked
        child.expect(">")
        child.sendline("y")
        child.expect(pexpect.EOF)
        child.close()
    assert (calc_repo / "marker.txt").exists()   # "y": it ran


def test_auto_edit_with_no_one_present_refuses_the_command(calc_repo, run_keel):
    with ScriptedEngineServer(script()) as server:
        r = run_keel(*run_args(server, calc_repo, "auto-edit", "--output-format", "json"))
        told = server.requests[2]["messages"][-1]["content"]
    assert "return a + b" in (calc_repo / "calc.py").read_text()
    assert not (calc_repo / "marker.txt").exists()
    assert "no one is present" in told and MAKE_MARKER in told, told
    assert "keel wants to" not in r.stdout + r.stderr


def test_full_auto_runs_an_ask_class_command_under_a_confining_tier(calc_repo, run_keel):
    tier = detect_sandbox()
    if not tier.confining:
        pytest.skip(f"no confining OS tier here: {tier.detail}")
    with ScriptedEngineServer(script()) as server:
        r = run_keel(*run_args(server, calc_repo, "full-auto", "--output-format", "json"))
    assert (calc_repo / "marker.txt").exists(), r.stderr and "return a + b" in (calc_repo / "calc.py").read_text()
    events = [json.loads(line) for line in Path(r.result["log"]).read_text().splitlines()]
    [approval] = [e for e in events if e["type"] == "approval"]
    assert approval["allowed"] and approval["how"].startswith("auto-approved"), approval


def test_full_auto_without_a_confining_tier_stops_before_anything_runs(calc_repo, keel_env, run_keel):
    sandbox_off(keel_env)
    with ScriptedEngineServer(script()) as server:
        r = run_keel(*run_args(server, calc_repo, "full-auto"))
        assert server.requests == []
    assert r.code == 2
    assert "full-auto runs ask-class commands without asking" in r.stderr
    assert "none (rlimits only)" in r.stderr and 'remove [shell] sandbox = "off"' in r.stderr
    assert "--approval auto-edit" in r.stderr
    assert "return a - b" in (calc_repo / "calc.py").read_text() and not (calc_repo / "marker.txt").exists()


def test_full_auto_from_the_config_file_is_the_same_error_for_every_front_end(calc_repo, keel_env, run_keel):
    sandbox_off(keel_env, '[permissions]\napproval = "full-auto"\n')
    with ScriptedEngineServer(script()) as server:
        json_run = run_keel("run", "x", "--cwd", str(calc_repo), "--base-url", server.base_url, "--model",
                            "scripted", "--output-format", "json")
        assert server.requests == []
    assert json_run.code == 2 and json_run.result["stop_reason"] == "config_error"
    assert "full-auto" in json_run.result["error"]
    tool = run_keel("tool", "run_shell", json.dumps({"command": MAKE_MARKER}), "--cwd", str(calc_repo))
    assert tool.code == 2 and "full-auto" in tool.stderr and not (calc_repo / "marker.txt").exists()
    repl = pexpect.spawn(sys.executable, ["-m", "keel.cli.main", "--cwd", str(calc_repo), "--base-url",
                                          "http://127.0.0.1:9/v1", "--model", "m"],
                         env=keel_env, encoding="utf-8", timeout=30, dimensions=(40, 200))
    repl.expect("full-auto runs ask-class commands without asking")
    repl.expect(pexpect.EOF)
    repl.close()
    assert repl.exitstatus == 2


@pytest.mark.parametrize("command", [["run", "--help"], ["repl", "--help"]])
def test_help_says_what_auto_edit_means_now(run_keel, command):
    shown = re.sub(r"-\s+", "-", " ".join(run_keel(*command).stdout.split()))  # argparse wraps at hyphens
    assert "auto-edit: edits proceed, ask-class commands are" in shown
    assert "before, auto-edit ran them: that is now full-auto" in shown
    assert "full-auto: they run unasked, allowed only under a confining OS sandbox" in shown
