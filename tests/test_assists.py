"""The assists as one layer (keel/core/assists.py): one registry, the [assists] switches, the `assist` events,
and `keel eval --arms`. The full profile with `[assists] all = false` is the plain loop: real HTTP to the
scripted engine shows its requests carry none of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import add_user_config, call, make_repo

from keel.config import AssistSettings, Config
from keel.core.assists import ASSISTS, FAMILIES, NAMES, Assists, choose, parse_switches
from keel.eval.arms import parse_arms
from keel.testing.server import ScriptedEngineServer

DOUBLE = 'def double(n):\n    """Twice n: double(3) -> 6. A negative n raises ValueError."""\n    raise NotImplementedError\n'
TEST_DOUBLE = "from mathx import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
TASK = "Implement double() in mathx.py as its docstring says."
RAMBLE = "I will look at the file and then I will decide what to change in it. " * 12   # the reply watch cuts it
# a reply that repeats, a claim with nothing done (refused) sent twice (a variant request next), a change
# whose claim the gate judges (the docstring's example and rule probed, the docstring reviewed), the fix
SCRIPT = [
    {"content": RAMBLE},
    {"tool_calls": [call("finish", summary="done")]},
    {"tool_calls": [call("finish", summary="done")]},
    {"tool_calls": [call("edit_file", path="mathx.py", old_text="    raise NotImplementedError", new_text="    return 2 * n")]},
    {"tool_calls": [call("finish", summary="double() doubles")]},
    {"tool_calls": [call("edit_file", path="mathx.py", old_text="    return 2 * n",
                         new_text="    if n < 0:\n        raise ValueError(n)\n    return 2 * n")]},
    {"tool_calls": [call("finish", summary="double() doubles and refuses a negative n")]},
    {"tool_calls": [call("finish", summary="double() doubles and refuses a negative n")]},
]


def test_the_config_has_one_switch_per_assist_and_one_for_all():
    assert [k for k in AssistSettings.model_fields if k != "all"] == list(NAMES)
    assert len(set(NAMES)) == len(NAMES) and all(a.reason and a.point for a in ASSISTS)
    # off for every profile until measured: each one a choice, named here
    assert [a.name for a in ASSISTS if not a.profiles] == ["claim_repair"]
    assert set(FAMILIES) == {a.family for a in ASSISTS}


def test_assists_are_for_the_small_profile_unless_measured_elsewhere():
    small, full = choose("small", {}), choose("full", {})
    assert small.names() == [n for n in NAMES if n != "claim_repair"]   # claim_repair: off until measured
    assert full.names() == ["spec_probes"]   # evidence for the gate, not help for the model
    assert "claim_repair" in choose("small", {"claim_repair": True})
    assert choose("full", {"variety": True}).names() == ["variety", "spec_probes"]
    assert choose("small", {"variety": False, "preload": "auto"}).names() == [
        n for n in NAMES if n not in ("variety", "claim_repair")]
    assert choose("small", {}, everything=False).names() == []
    with pytest.raises(KeyError):
        _ = "varietty" in small   # a typo at a site is an error, not "off"


def test_the_run_flag_reads_names_and_families():
    assert parse_switches("off") == {"all": False}
    assert parse_switches("variety=off, editor=on") == {"variety": False, "whole_file_editor": True,
                                                        "editor_checks": True, "python_edit_undo": True,
                                                        "expected_values": True}
    with pytest.raises(ValueError, match="no assist or family named 'varietty'"):
        parse_switches("varietty=off")
    with pytest.raises(ValueError, match="NAME=on"):
        parse_switches("variety")


def run_full(run_keel, keel_env: dict[str, str], tmp_path: Path, assists: str) -> tuple[object, list[dict]]:
    add_user_config(keel_env, assists)
    repo = make_repo(tmp_path / "repo", {"mathx.py": DOUBLE, "test_mathx.py": TEST_DOUBLE})
    with ScriptedEngineServer(SCRIPT) as server:
        r = run_keel("run", TASK, "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json", timeout=180)
        return r, server.requests


def _texts(requests: list[dict]) -> str:
    return "\n".join(str(m.get("content") or "") for q in requests for m in q["messages"])


def test_with_all_assists_off_the_full_profile_is_the_plain_loop(tmp_path: Path, run_keel, keel_env):
    r, requests = run_full(run_keel, keel_env, tmp_path, "[assists]\nall = false\n" +
                           "".join(f"{n} = true\n" for n in NAMES))   # all = false wins over each key
    assert r.code == 0, r.stdout + r.stderr
    events = r.events()
    assert next(e for e in events if e["type"] == "session_start")["assists"] == []
    assert not [e for e in events if e["type"] == "assist"]
    # every request sampled alike, with the same tools: no variant request
    assert {(q.get("temperature"), q.get("seed"), json.dumps(q.get("tools"))) for q in requests} == \
        {(requests[0].get("temperature"), requests[0].get("seed"), json.dumps(requests[0]["tools"]))}
    texts = _texts(requests)
    assert RAMBLE.strip() in texts                       # the rambling reply came back whole: no reply watch
    assert "- double in mathx.py:" not in texts          # no contract review
    assert "the comments' examples and rules" not in texts   # no probe of the docstring
    # the gate's own checks decided: the tests pass with the first implementation
    done = (tmp_path / "repo" / "mathx.py").read_text()
    assert r.result["stop_reason"] == "complete" and "return 2 * n" in done and "raise ValueError(n)" not in done


def test_the_same_run_with_the_assists_on_carries_them(tmp_path: Path, run_keel, keel_env):
    """The control: each assist the plain loop lacks is there when switched on for the full profile."""
    r, requests = run_full(run_keel, keel_env, tmp_path, "[assists]\n" + "".join(f"{n} = true\n" for n in NAMES))
    assert r.code == 0, r.stdout + r.stderr
    acted = {e["name"] for e in r.events() if e["type"] == "assist"}
    assert {"reply_watch", "variety", "spec_probes"} <= acted, acted
    assert any(q.get("temperature") != requests[0].get("temperature") for q in requests)   # the variant request
    assert "the comments' examples and rules" in _texts(requests) or "- double in mathx.py:" in _texts(requests)
    assert r.result["stop_reason"] == "complete"
    assert "raise ValueError(n)" in (tmp_path / "repo" / "mathx.py").read_text()


def test_keel_eval_runs_the_arms_and_prints_the_table(tmp_path: Path, run_keel):
    r = run_keel("eval", "--engine", "scripted", "--arms", "configured,off,no-variety", "py-wrong-operator",
                 "--cases-dir", str(Path(__file__).resolve().parent.parent / "evals"), "--out", str(tmp_path / "arms"),
                 timeout=600)
    assert r.code == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (tmp_path / "arms" / "configured" / "run.json").exists() and (tmp_path / "arms" / "off" / "run.json").exists()
    table = (tmp_path / "arms" / "assists.md").read_text()
    assert "| configured | 1 | 1 | 0 |" in table and "| off | 1 | 1 | 0 |" in table
    assert "| variety | variety | 0, 0 | 1, 0," in table and "Cases that flipped against the configured arm:\n- none" in table
    settings = json.loads((tmp_path / "arms" / "off" / "run.json").read_text())
    assert settings["agents"]["keel"]["assists"] == "off"


def test_an_agent_outside_a_run_gets_every_assist():
    from keel.tools.base import ToolContext

    assert ToolContext(workspace=Path(".")).assists == Assists.every()
    assert Config().assists.all is True


def test_an_arm_can_switch_on_one_assist_that_is_off_until_measured():
    """``--arms configured,with-claim_repair``: the A/B of an assist no profile has yet."""
    configured, repair = parse_arms("configured, with-claim_repair")
    assert (configured.label, repair.label) == ("configured", "with-claim_repair")
    assert "claim_repair" not in choose("small", parse_switches(configured.assists) if configured.assists else {})
    assert "claim_repair" in choose("small", parse_switches(repair.assists))
    with pytest.raises(ValueError, match="with-<assist>"):
        parse_arms("with-claim_repairs")
