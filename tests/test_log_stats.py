"""`keel log` and `keel stats` on the logs of real `keel run` sessions: the numbers agree with the
events, cost comes from the configured price table, and the hotspots a person would want to know
about (a file read again and again, one place edited over and over, a huge output) are named."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import call

from keel.core.schema import read_log
from keel.loop.limits import Prices
from keel.testing.server import ScriptedEngineServer

READ = call("read_file", path="calc.py")
SCRIPT = [
    {"tool_calls": [READ]},
    {"tool_calls": [call("read_file", path="calc.py", limit=10)]},   # the same read again would be refused
    {"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a * b")]},
    {"tool_calls": [call("edit_file", path="calc.py", old_text="return a * b", new_text="return a - b")]},
    {"tool_calls": [call("read_file", path="calc.py", limit=20), call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
    {"tool_calls": [call("read_file", path="big.txt")]},
    {"tool_calls": [call("run_shell", command="python -m pytest -q")]},
    {"tool_calls": [call("finish", summary="fixed")]},
]
PRICES = Prices(input_per_m=3.0, cached_input_per_m=0.3, output_per_m=15.0)


def _configure_prices(keel_env: dict[str, str]) -> None:
    config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[prices]\ninput_per_m = 3.0\ncached_input_per_m = 0.3\noutput_per_m = 15.0\n")


def _run(run_keel, repo: Path, script: list, task: str, *extra: str):
    (repo / "big.txt").write_text("".join(f"{i:5} {'word ' * 15}\n" for i in range(600)))  # ~50 KB
    with ScriptedEngineServer(script) as server:
        return run_keel("run", task, "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                        "--verify", "off", "--output-format", "json", *extra)


def test_stats_agree_with_the_log_and_name_the_hotspots(calc_repo, keel_env, run_keel):
    _configure_prices(keel_env)
    r = _run(run_keel, calc_repo, SCRIPT, "fix add")
    assert r.result["status"] == "complete", r.stdout
    session, log = r.result["session_id"], Path(r.result["log"])
    events = read_log(log).events
    calls = [e for e in events if e["type"] == "model_call"]
    prompt = sum(c["usage"]["prompt_tokens"] for c in calls)
    cached = sum(c["usage"]["cached_tokens"] for c in calls)
    completion = sum(c["usage"]["completion_tokens"] for c in calls)

    out = run_keel("stats", session, "--json")
    assert out.code == 0, out.stderr
    stats = json.loads(out.stdout)
    assert stats["steps"] == 8 and len(stats["calls"]) == 8
    assert stats["totals"]["prompt_tokens"] == prompt == r.result["usage"]["prompt_tokens"]
    assert stats["totals"]["completion_tokens"] == completion and stats["totals"]["cached_tokens"] == cached > 0
    assert stats["totals"]["cache_hit"] == round(cached / prompt, 4)
    assert stats["cost_usd"] == round(PRICES.cost(prompt, cached, completion), 6) > 0
    assert stats["cost_usd"] == r.result["cost_usd"]      # the run and the stats use the same price table
    tools = {t["name"]: t for t in stats["tools"]}
    assert tools["read_file"]["count"] == 4 and tools["edit_file"]["count"] == 3
    assert tools["read_file"]["max_output_bytes"] > 30000 and tools["run_shell"]["count"] == 1
    assert tools["read_file"]["max_ms"] >= tools["read_file"]["median_ms"] > 0
    hints = "\n".join(stats["hotspots"])
    assert "calc.py read 3 times" in hints
    assert "the same place in calc.py edited 2 times ('return a - b')" in hints
    assert "very long output: read_file at step 6" in hints

    text = run_keel("stats", session)
    assert text.code == 0
    for title in ("model calls", "tool calls by name", "hotspots", "cache hit", "calc.py read 3 times"):
        assert title in text.stdout, text.stdout


def test_log_lists_sessions_newest_first_and_shows_one_as_lines(calc_repo, keel_env, run_keel):
    first = _run(run_keel, calc_repo, SCRIPT[:2], "look at calc", "--max-steps", "2")
    second = _run(run_keel, calc_repo, SCRIPT, "fix add")
    listed = run_keel("log", "--json")
    assert listed.code == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [row["session_id"] for row in rows] == [second.result["session_id"], first.result["session_id"]]
    assert rows[0]["task"] == "fix add" and rows[0]["status"] == "complete" and rows[0]["steps"] == 8
    assert rows[1]["status"] == "incomplete (limit:steps)" and rows[1]["steps"] == 2
    assert rows[0]["tokens"] == second.result["usage"]["prompt_tokens"] + second.result["usage"]["completion_tokens"]
    assert rows[0]["cost_usd"] is None               # no price table: unknown, not $0

    table = run_keel("log")
    assert "keel sessions" in table.stdout and "fix add" in table.stdout

    # A unique prefix will do: one character past what both ids share (both may start in the same second).
    sid, other = second.result["session_id"], first.result["session_id"]
    shared = next((i for i, (a, b) in enumerate(zip(sid, other, strict=False)) if a != b), len(sid))
    lines = run_keel("log", sid[:max(17, shared + 1)]).stdout.splitlines()
    assert "start    model=scripted" in lines[0] and "task: fix add" in lines[0]
    assert any("tool     read_file calc.py ok" in line for line in lines)
    assert any("model    " in line and " in (" in line for line in lines)
    assert "stop     complete (complete)" in lines[-1]
    raw = run_keel("log", second.result["session_id"], "--json")
    assert [e["type"] for e in json.loads(raw.stdout)][-1] == "stop"


def test_unknown_sessions_are_usage_errors(keel_env, run_keel):
    assert run_keel("log").stdout.strip() == "no sessions yet"
    r = run_keel("stats", "nope")
    assert r.code == 2 and "no session" in r.stderr
    r = run_keel("log", "nope")
    assert r.code == 2 and "no session 'nope'" in r.stderr


def test_approvals_are_logged_with_how_they_were_settled(calc_repo, keel_env, run_keel):
    asks = call("run_shell", command="install -m 644 /dev/null marker.txt")   # asks under every sandbox tier
    script = [{"tool_calls": [asks]}, {"tool_calls": [call("read_file", path="calc.py")]}]
    refused = _run(run_keel, calc_repo, script, "make a marker", "--max-steps", "2")
    [event] = [e for e in read_log(Path(refused.result["log"])).events if e["type"] == "approval"]
    assert (event["action"], event["target"], event["allowed"], event["decision"], event["step"]) == (
        "shell", "install -m 644 /dev/null marker.txt", False, "ask", 1)
    assert "no one is present" in event["how"] and not (calc_repo / "marker.txt").exists()
    shown = run_keel("log", refused.result["session_id"]).stdout
    assert "approval shell install -m 644 /dev/null marker.txt: REFUSED" in shown

    approved = _run(run_keel, calc_repo, script, "make a marker", "--max-steps", "2", "--approval", "full-auto")
    [event] = [e for e in read_log(Path(approved.result["log"])).events if e["type"] == "approval"]
    assert event["allowed"] is True and event["how"].startswith("auto-approved")
    assert (calc_repo / "marker.txt").exists()


def test_sessions_are_ordered_by_start_and_defaults_stay_in_this_workspace(calc_repo, keel_env, run_keel, tmp_path):
    """An id a program chose ("zzz-…") is not a time: the list is newest first by start, as every
    command picks the latest. `keel stats` alone takes this workspace's latest, naming the workspace,
    and in a workspace with no session says so instead of showing another one's."""
    import subprocess
    import sys

    with ScriptedEngineServer([{"content": "Hello."}]) as server:
        subprocess.run([sys.executable, "-c", "from keel.agent import Agent\n"
                        f"Agent(workspace={str(calc_repo)!r}, base_url={server.base_url!r}, model='scripted', "
                        "session_id='zzz-chosen-by-a-program').run('say hello')"], env=keel_env, check=True,
                       capture_output=True)
    later = _run(run_keel, calc_repo, SCRIPT[:2], "look at calc", "--max-steps", "2")
    rows = json.loads(run_keel("log", "--json").stdout)
    assert [row["session_id"] for row in rows] == [later.result["session_id"], "zzz-chosen-by-a-program"]
    here = run_keel("stats", cwd=calc_repo)
    assert here.code == 0 and later.result["session_id"] in here.stdout and str(calc_repo) in here.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    there = run_keel("stats", cwd=elsewhere)
    assert there.code == 2 and f"no session ran in {elsewhere}" in there.stderr
    assert later.result["session_id"] in there.stderr                 # and which one is the latest anywhere


def test_piped_log_lines_are_not_wrapped(calc_repo, keel_env, run_keel):
    task = "look at calc.py and say in detail what each function does, " * 4   # ~240 characters
    r = _run(run_keel, calc_repo, SCRIPT[:2], task, "--max-steps", "2")
    lines = run_keel("log", r.result["session_id"]).stdout.splitlines()   # stdout is a pipe here
    events = read_log(Path(r.result["log"])).events
    assert len(lines) == len(events)                                      # one line per event, none wrapped
    assert max(map(len, lines)) > 120
    table = run_keel("log").stdout.splitlines()
    assert any(r.result["session_id"] in line and "look at calc" in line for line in table)
