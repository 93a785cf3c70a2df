"""Candidates judged by the gate (keel.drive.candidates): when change_file's rewrites leave the checks
failing, more rewrites sampled differently are tried on a copy and the first that passes stays."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from keel.agent import Agent
from keel.config import Config
from keel.drive.candidates import AGAIN, Candidate, choose, diff_size, stop_reason, trial_limit
from keel.testing import ScriptedEngineServer
from keel.tools.base import BudgetLeft
from keel.verify.gate import CheckOutcome
from keel.verify.plan import PlannedCheck

BROKEN = "def cost(cents, threshold=5000):\n    if cents > threshold:\n        return 0\n    return 499\n"
FIXED = BROKEN.replace("cents > threshold", "cents >= threshold")
PRICE_500 = FIXED.replace("return 499", "return 500")         # the threshold fixed, the price broken: 1 failing
ALWAYS_FREE = "def cost(cents, threshold=5000):\n    return 0\n\n\n# free\n"   # 1 failing
NEAR = BROKEN.replace("return 499", "return 499 if cents < 6000 else 0")   # 1 failing
TEST = ("from shipping import cost\n\ndef test_at_threshold():\n    assert cost(5000) == 0\n\n"
        "def test_small():\n    assert cost(100) == 499\n")
TASK = "A cart of exactly $50 is charged shipping; fix it."


# ---- the pure core --------------------------------------------------------------------------------

def c(n: int, failing: int | None, diff: int = 3, protected: bool = False, text: str | None = "x") -> Candidate:
    return Candidate(n, text, failing, diff, protected)


@pytest.mark.parametrize(("candidates", "kept"), [
    ([], None),
    ([c(1, 2), c(2, 1)], None),                          # none passes: none stays, however close
    ([c(1, 1), c(2, 0), c(3, 0)], 2),                    # the first that passes
    ([c(1, 0, diff=9), c(2, 0, diff=2), c(3, 0, diff=2)], 2),   # the smallest diff; the first among equals
    ([c(1, 0, diff=1, protected=True), c(2, 0, diff=5)], 2),    # a protected test's rewrite never stays
    ([c(1, 0, protected=True)], None),
    ([c(1, None, text=None), c(2, None)], None),         # no rewrite, or not tried
])
def test_choose(candidates: list[Candidate], kept: int | None) -> None:
    chosen = choose(candidates)
    assert (chosen.n if chosen is not None else None) == kept


@pytest.mark.parametrize(("tried", "limit", "left", "reason"), [
    ([], 2, BudgetLeft(), None),
    ([c(1, 1)], 2, BudgetLeft(), None),
    ([c(1, 1), c(2, 3)], 2, BudgetLeft(), "limit"),
    ([c(1, 0)], 4, BudgetLeft(), "passed"),
    ([c(1, 0, protected=True)], 4, BudgetLeft(), "protected"),
    ([], 2, BudgetLeft(tokens=999), "tokens"),            # one more costs 1000
    ([], 2, BudgetLeft(tokens=1000, seconds=29.0), "time"),   # ... and 30 s
    ([], 2, BudgetLeft(tokens=1000, seconds=30.0, cost_usd=0.0), None),   # cost is the runner's to stop
    ([c(1, 0), c(2, 1)], 2, BudgetLeft(tokens=0), "passed"),   # a pass is said before a spent budget
])
def test_stop_reason(tried: list[Candidate], limit: int, left: BudgetLeft, reason: str | None) -> None:
    assert stop_reason(tried, limit, left, 1000, 30.0) == reason


def test_diff_size_counts_lines_added_and_removed():
    assert diff_size(BROKEN, FIXED) == 2 and diff_size(BROKEN, BROKEN) == 0
    assert diff_size(None, "a\nb\n") == 2 and diff_size(BROKEN, PRICE_500) == 4


# ---- in a run, over real HTTP ---------------------------------------------------------------------

@pytest.fixture
def shop(tmp_path: Path) -> Path:
    ws = tmp_path / "shop"
    ws.mkdir()
    (ws / "shipping.py").write_text(BROKEN)
    (ws / "test_shipping.py").write_text(TEST)
    return ws


def call(name: str, **args: object) -> dict[str, object]:
    return {"name": name, "arguments": args}


def editor(text: str, tokens: int | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"content": f"Here is the file:\n```python\n{text}```\n"}
    if tokens is not None:
        step["usage"] = {"prompt_tokens": tokens - 100, "completion_tokens": 100}
    return step


def run_shop(shop: Path, steps: list[dict[str, Any]], *, change: str = "charge 500", path: str = "shipping.py",
             tune: Any = None, usage: dict[str, int] | None = None,
             ) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    """One change_file call answered by ``steps`` (the editor's replies), then finish: the result, the
    requests the engine got and the run's events. ``usage``: the model's own turns' token counts."""
    log = shop.parent / "session.jsonl"
    turn = {"usage": usage} if usage is not None else {}
    script = [{"tool_calls": [call("change_file", path=path, change=change)], **turn}, *steps,
              {"tool_calls": [call("finish", summary="fixed")], **turn}]
    with ScriptedEngineServer(script) as server:
        cfg = Config()
        cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", "small"
        if tune is not None:
            tune(cfg)
        result = Agent(workspace=shop, config=cfg, log_path=log).run(TASK)
        requests = server.requests
    return result, requests, [json.loads(line) for line in log.read_text().splitlines()]


def tool_reply(result: Any) -> str:
    return next(m["content"] for m in result.messages if m.get("role") == "tool")


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def test_when_both_rewrites_fail_a_candidate_that_passes_is_kept_and_the_search_stops_there(shop: Path):
    def three(cfg: Config) -> None:
        cfg.verify.candidates = 3
    marked = "from pathlib import Path\n\nPath(__file__).with_name('candidate-ran').touch()\n\n\n" + NEAR
    result, requests, events = run_shop(shop, [editor(PRICE_500), editor(ALWAYS_FREE),   # note, task alone: 1 failing
                                               editor(marked), editor(FIXED)], tune=three)
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"
    reply = tool_reply(result)
    assert "2 more rewrite(s) sampled differently, tried on a copy of the workspace (" in reply
    assert "candidate 2 passes the project's checks and is what was written" in reply
    assert "pass. If the task is done, call finish." in reply
    # each candidate is the task-alone request sampled differently: hotter, a seed of its own
    editors = [r for r in requests if not r.get("tools")]
    assert len(editors) == 4   # the third candidate was never asked for
    assert [r.get("temperature") for r in editors] == [0.0, 0.0, 0.5, 0.5]
    assert [r.get("seed") for r in editors] == [1234, 1234, 1235, 1236]
    assert editors[2]["messages"] == editors[1]["messages"]
    found = of(events, "candidate")
    assert [(e["n"], e["failing_before"], e["failing"], e["kept"]) for e in found] == [(1, 1, 1, False), (2, 1, 0, True)]
    assert found[0]["why"] == "1 failing" and found[0]["diff_lines"] == 7 and found[1]["diff_lines"] == 2 and found[1]["seed"] == 1236
    assert all(e["tokens"] > 0 and e["seconds"] > 0 for e in found)
    assert any(e["name"] == "candidates" for e in of(events, "assist"))
    # the losing candidate was judged on a copy: its tests ran there, never in the workspace
    assert not (shop / "candidate-ran").exists()


def test_a_candidate_that_rewrites_a_protected_test_is_discarded_untried(shop: Path):
    def no_redirect(cfg: Config) -> None:   # the change reaches the test file itself
        cfg.assists.test_redirect = cfg.assists.callee_change = False   # nor on to the code it calls
        cfg.limits.max_steps = 2
    passing_test = TEST.replace("== 0", "== 499")
    still_failing = TEST + "\n\n# the threshold is inclusive\n"   # fails as before: it stays
    result, requests, events = run_shop(shop, [editor(still_failing), editor(still_failing), editor(passing_test)],
                                        path="test_shipping.py", change="expect 499 at the threshold", tune=no_redirect)
    assert (shop / "test_shipping.py").read_text() == still_failing   # the model's own rewrite; never the candidate's
    found = of(events, "candidate")
    assert [(e["n"], e["failing"], e["kept"], e["why"]) for e in found] == [(1, None, False, "rewrites a protected test")]
    assert "none passed the checks (stopped: each would rewrite a protected test)" in tool_reply(result)
    assert len([r for r in requests if not r.get("tools")]) == 3   # one candidate: every one would rewrite the test


def test_the_search_stops_at_the_limit_of_candidates(shop: Path):
    result, requests, events = run_shop(shop, [editor(PRICE_500), editor(ALWAYS_FREE), editor(NEAR),
                                               editor(ALWAYS_FREE)])   # the default limit, 2
    assert (shop / "shipping.py").read_text() == PRICE_500   # none passed: the model's own rewrite stays (a tie)
    assert "none passed the checks (stopped: the limit of candidates); none was kept." in tool_reply(result)
    assert [e["kept"] for e in of(events, "candidate")] == [False, False]
    assert len([r for r in requests if not r.get("tools")]) == 4


def test_the_runs_token_budget_stops_the_search_before_a_candidate_it_cannot_pay_for(shop: Path,
                                                                                    keel_env: dict[str, str]):
    start = shop.parent / "start"
    shutil.copytree(shop, start)

    def budget(cfg: Config) -> None:
        cfg.verify.candidates = 4
        cfg.limits.max_tokens = 4000   # 500 for the model's turn, 2000 for the two rewrites: room for one more
    result, requests, events = run_shop(shop, [editor(PRICE_500, 1000), editor(ALWAYS_FREE, 1000),
                                               editor(NEAR, 1000), editor(FIXED, 1000)], tune=budget,
                                        usage={"prompt_tokens": 400, "completion_tokens": 100})
    assert [e["tokens"] for e in of(events, "candidate")] == [1000]
    assert "1 more rewrite(s) sampled differently, tried on a copy of the workspace (1000 tokens" in tool_reply(result)
    assert "stopped: the run's token budget" in tool_reply(result)
    assert len([r for r in requests if not r.get("tools")]) == 3
    assert (shop / "shipping.py").read_text() == PRICE_500
    # replayed with the tokens served as recorded, the budget stops the search where it did
    proc = replay(shop.parent / "session.jsonl", start, keel_env, "--json")
    report = json.loads(proc.stdout)
    assert report["candidates"] == {"1": ["shipping.py #1 lost (1 failing)"]}
    # (the run itself ended on the token limit at the step the replay's step limit ends it)
    assert [d["field"] for d in report["differences"]] == ["stop"], report["differences"]


def replay(log: Path, start: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "keel.cli.main", "replay", str(log), "--cwd", str(start), *flags],
                          env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)


def test_with_the_assist_off_change_file_asks_as_before(shop: Path):
    def off(cfg: Config) -> None:
        cfg.assists.candidates = False
    result, requests, events = run_shop(shop, [editor(PRICE_500), editor(ALWAYS_FREE)], tune=off)
    assert len([r for r in requests if not r.get("tools")]) == 2 == len(of(events, "change_request"))
    assert not of(events, "candidate") and "sampled differently" not in tool_reply(result)
    assert (shop / "shipping.py").read_text() == PRICE_500
    assert "candidates" not in next(e for e in events if e["type"] == "session_start")["assists"]


def test_keel_replay_serves_the_editor_again_and_shows_the_candidates(shop: Path, keel_env: dict[str, str]):
    start = shop.parent / "start"
    shutil.copytree(shop, start)
    _, _, events = run_shop(shop, [editor(PRICE_500), editor(ALWAYS_FREE), editor(NEAR), editor(FIXED)])
    assert len(of(events, "candidate")) == 2
    log = shop.parent / "session.jsonl"
    proc = replay(log, start, keel_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "step 1: candidates shipping.py #1 lost (1 failing), shipping.py #2 kept" in proc.stdout
    assert "0 difference(s)" in proc.stdout
    # a candidate judged otherwise now is a difference: with looser tests the first candidate passes
    (start / "test_shipping.py").write_text(TEST.replace("cost(5000) == 0", "cost(5000) in (0, 499)"))
    proc = replay(log, start, keel_env, "--json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["candidates"] == {"1": ["shipping.py #1 kept"]}
    assert {"step": 1, "call": None, "tool": "change_file", "field": "candidates",
            "recorded": ["shipping.py #1 lost (1 failing)", "shipping.py #2 kept"],
            "now": ["shipping.py #1 kept"]} in report["differences"]


# ---- the same change sent again: one more round (the again assist, keel.drive.candidates.Rounds) ----------
def test_a_change_sent_again_after_its_checks_failed_is_a_fresh_round_that_can_pass(shop: Path):
    again = {"tool_calls": [call("change_file", path="shipping.py", change="charge 500")]}
    result, requests, events = run_shop(shop, [editor(PRICE_500), editor(ALWAYS_FREE), editor(NEAR), editor(ALWAYS_FREE),
                                               again, editor(FIXED)])
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"
    replies = [m["content"] for m in result.messages if m.get("role") == "tool"]
    assert "Not run" not in replies[1] and "pass. If the task is done, call finish." in replies[1]
    editors = [r for r in requests if not r.get("tools")]
    # round 1 samples with variants round 0 never used (seed 1234 + 4), from the file round 0 left
    assert [r.get("seed") for r in editors] == [1234, 1234, 1235, 1236, 1238]
    shown = editors[4]["messages"][1]["content"]
    assert editors[4]["temperature"] == 0.5 and "cents >= threshold" in shown and "return 500" in shown
    assert [e["name"] for e in of(events, "assist")].count("whole_file_editor") == 2
    # counted for keel eval's per-assist table (it showed 0 acts while rounds ran)
    assert [e["detail"] for e in of(events, "assist") if e["name"] == "again"] == ["shipping.py: round 2 of this change"]


def test_when_none_passes_the_candidate_that_fails_least_is_written_if_it_beats_the_rewrites(shop: Path):
    both = "def cost(cents, threshold=5000):\n    return 1\n"   # both tests fail
    result, _, events = run_shop(shop, [editor(both), editor(both + "\n"), editor(both + "# x\n"), editor(PRICE_500)])
    assert (shop / "shipping.py").read_text() == PRICE_500   # 1 failing, as before the call: not worse, kept
    assert "none passed the checks; candidate 2 fails less (1 failing, 2 before) and is what was written" \
        in tool_reply(result)
    assert [e["failing"] for e in of(events, "candidate")] == [2, 1]


def test_a_later_round_whose_two_rewrites_came_back_unchanged_still_searches(shop: Path):
    again = {"tool_calls": [call("change_file", path="shipping.py", change="charge 500")]}
    result, requests, events = run_shop(shop, [editor(PRICE_500), editor(ALWAYS_FREE), editor(NEAR),
                                               editor(ALWAYS_FREE), again, editor(PRICE_500), editor(PRICE_500),
                                               editor(FIXED)])
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"
    assert [(e["n"], e["kept"]) for e in of(events, "candidate")][-1] == (1, True)
    # the candidate is sampled from the file as the run found it, not the run's own rewrite it gave back
    editors = [r["messages"][1]["content"] for r in requests if not r.get("tools")]
    assert "return 500" in editors[-2] and "return 500" not in editors[-1] and BROKEN in editors[-1]


def test_a_file_the_run_wrote_is_searched_even_when_a_new_changes_rewrites_came_back_unchanged(shop: Path):
    """Measured (js-spec-brackets): the run's own brackets.js failed 2 tests; a new note's two rewrites came
    back unchanged, and no candidate was asked, three times."""
    other = {"tool_calls": [call("change_file", path="shipping.py", change="fix the price")]}
    result, _, events = run_shop(shop, [editor(PRICE_500), editor(ALWAYS_FREE), editor(NEAR), editor(ALWAYS_FREE),
                                        other, editor(PRICE_500), editor(PRICE_500), editor(FIXED)])
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"
    assert [(e["n"], e["kept"]) for e in of(events, "candidate")][-1] == (1, True)


HANGS = "def cost(cents, threshold=5000):\n    while True:\n        pass\n"


def test_a_candidate_whose_checks_run_past_the_trial_limit_is_dropped_and_the_search_goes_on(shop: Path):
    """Exercism dominoes on the 1.5B: a candidate's brute force kept the tests running 132 s of the run's 420.
    A candidate's checks get ten times what the checks took before the call, at least 20 s (trial_limit);
    here the project's own 3 s limit is shorter, and rules."""
    def tune(cfg: Config) -> None:
        cfg.verify.check_timeout_s = 3
    result, _, events = run_shop(shop, [editor(PRICE_500), editor(ALWAYS_FREE), editor(HANGS), editor(FIXED)],
                                 tune=tune)
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"
    found = of(events, "candidate")
    assert [(e["n"], e["failing"], e["kept"]) for e in found] == [(1, None, False), (2, 0, True)]
    assert found[0]["why"] == "its checks ran past 3 s, so it was dropped" and found[0]["seconds"] < 20


@pytest.mark.parametrize(("took", "floor", "limit"), [
    (None, 20.0, None), ((), 20.0, None),                    # no run before: the checks' own limit
    ((0.6,), 20.0, 20.0), ((0.6, 5.0), 20.0, 50.0), ((1.4,), 60.0, 60.0),   # the model's own rewrites: floor 60 s
    (("unloaded",), 20.0, None), (("timed out",), 20.0, None)])   # a run that stopped early says nothing
def test_the_trial_limit_is_ten_times_what_the_checks_took_before_and_at_least_a_floor(took, floor, limit) -> None:
    def ran(t: float | str) -> CheckOutcome:
        check = PlannedCheck("test", "pytest -q", "test")
        return CheckOutcome(check, 1, 0.5 if isinstance(t, str) else t, "d", timed_out=t == "timed out",
                            unloaded=("test_x.py",) if t == "unloaded" else ())
    assert trial_limit(None if took is None else [ran(t) for t in took], floor) == limit


def test_a_check_cut_short_by_a_callers_limit_is_run_in_full_by_the_next_caller(tmp_path: Path) -> None:
    """change_file's rewrites run the checks under trial_limit; the gate then runs them under their own
    limit, not from the cache (a slow pass cut at the rewrite's limit is no evidence of a hang)."""
    from keel.policy.approval import Approver
    from keel.policy.rules import RuleSet
    from keel.tools.base import ToolContext
    from keel.verify.plan import CheckSet
    from keel.verify.verifier import Verifier

    (tmp_path / "slow.py").write_text("import time\ntime.sleep(3)\nprint('done')\n")
    check = PlannedCheck("test", f"{sys.executable} slow.py", "slow")
    approval = Approver("unattended", RuleSet.from_config([], [], []), workspace=tmp_path)
    gate = Verifier(CheckSet(checks=(check,)), ToolContext(workspace=tmp_path, approval=approval), check_timeout_s=60)
    (cut,) = gate.run_plan(limit_s=1)
    assert cut.timed_out and not cut.passed and cut.duration_s < 3
    (full,) = gate.run_plan()
    assert full.passed and not full.timed_out and full.duration_s >= 3


STUB = "def cost(cents, threshold=5000):\n    pass\n"


def test_a_stub_whose_two_rewrites_came_back_unusable_is_searched_at_once(shop: Path):
    """Exercism luhn on the 1.5B: both rewrites of the stub were cut off, no candidate was asked (the cause
    might have been elsewhere), and the model had to send the same change again. A stub's placeholders are
    why its tests fail; a file that is no stub still is not searched."""
    (shop / "shipping.py").write_text(STUB)
    result, _, events = run_shop(shop, [editor(STUB), editor(STUB), editor(FIXED)])
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"
    assert [(e["n"], e["kept"]) for e in of(events, "candidate")] == [(1, True)]
    # a file that is no stub, its two rewrites unchanged: the cause may be elsewhere, and nothing is searched
    (shop / "shipping.py").write_text(BROKEN)
    (shop.parent / "session.jsonl").unlink()
    _, _, events = run_shop(shop, [editor(BROKEN), editor(BROKEN)])
    assert not of(events, "candidate") and (shop / "shipping.py").read_text() == BROKEN


def test_rounds_are_bounded_and_without_the_assist_a_repeat_is_not_run(shop: Path):
    again = {"tool_calls": [call("change_file", path="shipping.py", change="charge 500")]}
    round_ = [editor(PRICE_500), editor(ALWAYS_FREE), editor(NEAR)]   # one candidate: three requests a round

    def one(cfg: Config) -> None:
        cfg.verify.candidates, cfg.limits.max_steps = 1, AGAIN + 3
    result, requests, _ = run_shop(shop, [*round_, *[again, *round_] * AGAIN, again], tune=one)
    replies = [m["content"] for m in result.messages if m.get("role") == "tool"]
    assert [r.startswith("Not run") for r in replies[:AGAIN + 2]] == [False] * (AGAIN + 1) + [True]   # 1 + AGAIN
    assert len([r for r in requests if not r.get("tools")]) == 3 * (AGAIN + 1)

    def off(cfg: Config) -> None:
        one(cfg)
        cfg.assists.again = False
    result, requests, _ = run_shop(shop, [*round_, again], tune=off)
    replies = [m["content"] for m in result.messages if m.get("role") == "tool"]
    assert replies[1].startswith("Not run: you already called change_file")
    assert len([r for r in requests if not r.get("tools")]) == 3


# ---- the gate's probes judge a rewrite as they judge a claim (py-discount-cent) --------------------------
MONEY = ('def percent_of(cents, percent):\n    """``percent`` % of ``cents``, rounded to the nearest cent (half a cent '
         'rounds up)."""\n    return int(cents * percent / 100)\n')
BANKER = MONEY.replace("int(cents * percent / 100)", "round(cents * percent / 100)")
HALF_UP = MONEY.replace("int(cents * percent / 100)", "(cents * percent + 50) // 100")
TEST_MONEY = "from money import percent_of\n\n\ndef test_staff():\n    assert percent_of(3349, 30) == 1005\n"
TASK_MONEY = "The staff discount is a cent short. Discounts are supposed to be rounded to the nearest cent. Fix it."


def test_a_rewrite_the_half_up_probe_refuses_is_not_kept_when_a_candidate_passes_it(tmp_path: Path):
    """Measured on the 1.5B: round() passed the tests and change_file wrote it; the gate's probe refused the
    claim, and the same change sent again was refused as a repeat. Judged by the probe too, the call's own
    search finds the half-up rewrite."""
    ws = tmp_path / "shop"
    ws.mkdir()
    (ws / "money.py").write_text(MONEY)
    (ws / "test_money.py").write_text(TEST_MONEY)
    script = [{"tool_calls": [call("change_file", path="money.py", change="use round()")]},
              editor(BANKER), editor(BANKER), editor(HALF_UP),
              {"tool_calls": [call("finish", summary="percent_of rounds half a cent up")]},
              {"tool_calls": [call("finish", summary="percent_of rounds half a cent up, as its comment says")]}]
    log = tmp_path / "session.jsonl"
    with ScriptedEngineServer(script) as server:
        cfg = Config()
        cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", "small"
        result = Agent(workspace=ws, config=cfg, log_path=log).run(TASK_MONEY)
    assert (ws / "money.py").read_text() == HALF_UP and result.status == "complete"
    reply = tool_reply(result)
    assert "candidate 1 passes the project's checks and is what was written" in reply
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["n"], e["kept"]) for e in of(events, "candidate")] == [(1, True)]


def test_each_search_of_a_file_draws_fresh_samples_also_for_a_new_note(shop: Path):
    """A search's candidates are asked without the note, from the file as the run found it: a new note's
    search drew the last one's samples again (the 1.5B's checkout.py, seeds 1235 and 1236, three times)."""
    other = {"tool_calls": [call("change_file", path="shipping.py", change="fix the price")]}
    result, requests, events = run_shop(shop, [editor(PRICE_500), editor(ALWAYS_FREE), editor(NEAR), editor(NEAR),
                                               other, editor(PRICE_500), editor(ALWAYS_FREE), editor(NEAR),
                                               editor(FIXED)])
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"
    seeds = [(e["step"], e["seed"]) for e in of(events, "candidate")]
    first, second = {s for step, s in seeds if step == 1}, {s for step, s in seeds if step == 2}
    assert len(first) == 2 and len(second) == 2 and not first & second, seeds


BOTH_FAIL = "def cost(cents, threshold=5000):\n    return 1\n"   # test_at_threshold and test_small fail


@pytest.mark.parametrize("focus", [True, False])
def test_with_two_tests_failing_each_candidate_is_asked_to_make_one_of_them_pass_first(shop: Path, focus: bool):
    """The focus assist (py-spec-instructions: 8 of 8 candidates failed the same two tests)."""
    (shop / "shipping.py").write_text(BOTH_FAIL)

    def tune(cfg: Config) -> None:
        cfg.assists.focus = focus
    result, requests, events = run_shop(shop, [editor(BOTH_FAIL.replace("1", "2")), editor(BOTH_FAIL.replace("1", "3")),
                                               editor(ALWAYS_FREE), editor(BOTH_FAIL.replace("1", "4"))], tune=tune)
    editors = [r["messages"][1]["content"] for r in requests if not r.get("tools")]
    asked = editors[2:]   # the two candidates
    aims = [a.split("Make this failing test pass first: ", 1)[1].split("\n", 1)[0] if focus else a for a in asked]
    # each candidate's request repeats the one before it up to the task's end, where the focus is said:
    # the engine's cache keeps that part (a long task was read again for every candidate)
    assert all(a.startswith(editors[1].rsplit("Reply with", 1)[0]) for a in asked)
    if focus:
        assert aims[0].startswith("FAILED test_shipping.py::test_at_threshold - assert 1 == 0")
        assert aims[1].startswith("FAILED test_shipping.py::test_small - assert 1 == 499")
        # with the test's own lines as pytest printed them: its inputs and what it expects, its error
        first, second = (a.split("Make this failing test pass first: ", 1)[1].split("Reply with", 1)[0] for a in asked)
        assert ">       assert cost(5000) == 0" in first and "cost(100)" not in first
        assert ">       assert cost(100) == 499" in second and "E       assert 1 == 499" in second
        assert any(e["name"] == "focus" and "2 failing tests" in e["detail"] for e in of(events, "assist"))
    else:
        assert not any("Make this failing test pass first" in a for a in asked)
        assert not any(e["name"] == "focus" for e in of(events, "assist"))
    # either way the candidate that fails less is written, and the next round starts from it
    assert "candidate 1 fails less (1 failing, 2 before) and is what was written" in tool_reply(result)
    assert (shop / "shipping.py").read_text() == ALWAYS_FREE
