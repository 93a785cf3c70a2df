"""What "complete" means for the way people actually ask (keel issue 32), through `python -m keel.cli.main run`
with the scripted engine over real HTTP, real pytest runs and real files.

- item 1: "Can you fix add() in calc.py?" with add() returning a - b and its test failing, answered "Done: the
  tests pass now." without a change, ended complete with verification passed. It must not.
- item 2: "What does this project do? Just explain, do not change anything." answered in words was pushed to
  make a change and ended limit:verification. It must end complete, its answer the result's summary.
- every phrasing class both ways: polite change questions, negations, questions back, promises to look,
  a forbidden change, a change whose checks all fail as before, and the languages the reader holds.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import call, make_repo

from keel.testing.server import ScriptedEngineServer

CALC_BUG = "def add(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
DONE = {"content": "Done: the tests pass now."}
FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
ANSWER = ("This project is a tiny calculator: calc.py defines add(a, b), which returns a - b, and test_calc.py "
          "checks that add(2, 3) == 5.")


def run(run_keel, repo: Path, task: str, script: list[dict], *extra: str):
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", task, "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json", *extra, timeout=180)
        left = server.remaining
    return r, left


def pushback_kinds(r) -> list[str]:
    return [e["pushback_kind"] for e in r.events() if e["type"] == "decision" and e.get("pushback_kind")]


def tracked_unchanged(repo: Path) -> bool:
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, text=True,
                            capture_output=True, check=True).stdout
    return not [line for line in status.splitlines() if "__pycache__" not in line and ".pytest_cache" not in line]


@pytest.fixture
def bug_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "calc", {"calc.py": CALC_BUG, "test_calc.py": TEST_CALC})


# -- item 1: a polite question with a change verb is a change request --------------------------------------
@pytest.mark.parametrize("task", ["Can you fix add() in calc.py?", "Could you make add() in calc.py add?",
                                  "¿Puedes arreglar add() en calc.py?", "Kannst du add() in calc.py reparieren?"])
def test_the_false_done_of_item_1_is_refused(bug_repo: Path, run_keel, task: str):
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, DONE, DONE, DONE, DONE]
    r, _ = run(run_keel, bug_repo, task, script)
    assert r.result["status"] != "complete", r.result
    assert r.result["request"]["kind"] == "change"
    assert "no_change" in pushback_kinds(r)
    assert r.result["verification"]["status"] == "failed"


def test_the_same_request_completes_once_the_fix_is_made(bug_repo: Path, run_keel):
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, DONE, {"tool_calls": [FIX]},
              {"content": "add() returns a + b now; test_calc passes."}]
    r, left = run(run_keel, bug_repo, "Can you fix add() in calc.py?", script)
    assert (r.result["status"], r.result["verification"]["status"]) == ("complete", "passed"), r.result
    assert left == 0


def test_a_change_whose_checks_all_fail_as_before_is_not_done(bug_repo: Path, run_keel):
    """"Could you add a sub() function?": sub() is added, test_add still fails as before and no test passed.
    The old failure says nothing of sub(); the model's own run that imports it does."""
    add_sub = call("edit_file", path="calc.py", old_text="    return a - b\n",
                   new_text="    return a - b\n\n\ndef sub(a, b):\n    return a - b\n")
    script = [{"tool_calls": [add_sub]}, {"content": "Added sub()."},
              {"tool_calls": [call("run_shell", command="python3 -c 'import calc; assert calc.sub(5, 3) == 2'")]},
              {"content": "Added sub(); calc.sub(5, 3) == 2."}]
    r, left = run(run_keel, bug_repo, "Could you add a sub() function?", script)
    assert pushback_kinds(r) == ["no_evidence"]
    assert r.result["status"] == "complete" and left == 0
    assert r.result["verification"]["status"] == "failing_before"


# -- item 2: a question ends with its answer -------------------------------------------------------------
@pytest.mark.parametrize("task", [
    "What does this project do? Just explain, do not change anything.",
    "Explain calc.py without modifying it.",
    "How would you refactor add()? Don't do it yet.",
    "Was macht dieses Projekt? Bitte nichts ändern.",
    "Que fait ce projet ? Explique seulement, ne modifie rien.",
    "这个项目是做什么的？只解释，不要修改任何文件。",
])
def test_a_question_ends_complete_with_its_answer(bug_repo: Path, run_keel, task: str):
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": ANSWER}]
    r, left = run(run_keel, bug_repo, task, script)
    assert (r.result["status"], r.result["stop_reason"]) == ("complete", "complete"), r.result
    assert r.result["summary"] == ANSWER and left == 0
    assert r.result["request"] == {**r.result["request"], "kind": "answer", "forbids_change": True}
    assert r.result["verification"]["status"] == "answered"
    assert not any(e["type"] == "verification" and e.get("checks") for e in r.events())   # nothing was run
    assert tracked_unchanged(bug_repo)


def test_a_plain_question_answered_without_a_tool_is_nudged_once_then_accepted(bug_repo: Path, run_keel):
    r, left = run(run_keel, bug_repo, "What is a calculator?", [{"content": "A machine for arithmetic."}] * 2)
    assert r.result["status"] == "complete" and pushback_kinds(r) == ["did_nothing"] and left == 0


@pytest.mark.parametrize(("reply", "why"), [
    ("Which file do you mean?", "question_unattended"),
    ("I will look at calc.py first.", "no_answer"),
    ("Done.", "no_answer"),
])
def test_a_question_back_or_a_promise_is_no_answer(bug_repo: Path, run_keel, reply: str, why: str):
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": reply}, {"content": ANSWER}]
    r, left = run(run_keel, bug_repo, "What does calc.py do?", script)
    assert pushback_kinds(r) == [why]
    assert r.result["status"] == "complete" and r.result["summary"] == ANSWER and left == 0


def test_a_file_change_the_user_forbade_is_not_run(bug_repo: Path, run_keel):
    """On the 1.5B, "just explain, do not change anything" got change_file calls that rewrote two files."""
    r, left = run(run_keel, bug_repo, "What does calc.py do? Don't change anything.", [{"tool_calls": [FIX]},
                                                                                        {"content": ANSWER}])
    assert r.result["status"] == "complete" and left == 0 and tracked_unchanged(bug_repo), r.result
    assert any("Not run: this request asks for an answer" in json.dumps(e) for e in r.events()
               if e["type"] == "tool_call")


SHELL_FIX = call("run_shell", command="sed -i 's/a - b/a + b/' calc.py")


def test_a_shell_change_the_user_forbade_is_reported_and_never_complete(bug_repo: Path, run_keel):
    script = [{"tool_calls": [SHELL_FIX]}, {"content": ANSWER}, {"content": ANSWER}, {"content": ANSWER}]
    r, _ = run(run_keel, bug_repo, "What does calc.py do? Don't change anything.", script)
    assert r.result["status"] == "incomplete" and r.result["stop_reason"] == "limit:verification", r.result
    verification = r.result["verification"]
    assert verification["changed_answer_only"] == ["calc.py"] and verification["forbidden"] is True
    assert pushback_kinds(r) == ["changed_answer_only", "changed_answer_only"]


def test_a_forbidden_change_put_back_lets_the_answer_stand(bug_repo: Path, run_keel):
    undo = call("run_shell", command="sed -i 's/a + b/a - b/' calc.py")
    script = [{"tool_calls": [SHELL_FIX]}, {"content": ANSWER}, {"tool_calls": [undo]}, {"content": ANSWER}]
    r, left = run(run_keel, bug_repo, "What does calc.py do? Don't change anything.", script)
    assert r.result["status"] == "complete" and left == 0 and tracked_unchanged(bug_repo), r.result


def test_caches_are_no_change(bug_repo: Path, run_keel):
    """Running the tests to answer writes __pycache__ and .pytest_cache: not a change to the workspace."""
    script = [{"tool_calls": [call("run_shell", command="python3 -m pytest -q")]},
              {"content": "test_add fails: add(2, 3) returns -1 because add() subtracts."}]
    r, left = run(run_keel, bug_repo, "Why does test_add fail? Only explain.", script)
    assert r.result["status"] == "complete" and left == 0, r.result


# -- make sure -------------------------------------------------------------------------------------------
def test_work_that_needs_no_change_ends_when_nothing_new_fails(bug_repo: Path, run_keel):
    """"run the tests" in the REPL's way: no change is needed, and the old failure is not this run's."""
    script = [{"tool_calls": [call("run_shell", command="python3 -m pytest -q")]},
              {"content": "Ran them: test_add fails (add subtracts); nothing else does."}]
    r, left = run(run_keel, bug_repo, "run the tests", script)
    assert r.result["status"] == "complete" and r.result["request"]["kind"] == "verify" and left == 0


def test_make_sure_the_tests_pass_is_judged_by_the_checks(bug_repo: Path, run_keel):
    script = [{"tool_calls": [call("run_shell", command="python3 -m pytest -q")]}, {"content": "They pass."},
              {"tool_calls": [FIX]}, {"content": "Fixed add(); the tests pass."}]
    r, left = run(run_keel, bug_repo, "Make sure the tests pass.", script)
    assert pushback_kinds(r) == ["verification_failed"]
    assert r.result["status"] == "complete" and left == 0


# -- layouts: pytest-style tests anywhere under a Python project ------------------------------------------
LAYOUTS = {
    "src layout, pyproject without [tool.pytest]": ("proj", {
        "pyproject.toml": '[project]\nname = "pkg"\nversion = "0.1"\n',
        "src/pkg/__init__.py": CALC_BUG, "src/pkg/tests/test_add.py": TEST_CALC.replace("calc", "pkg")}),
    "package with setup.py, tests beside the code": ("proj", {
        "setup.py": "from setuptools import setup\nsetup(name='pkg')\n", "pkg/__init__.py": "",
        "pkg/calc.py": CALC_BUG, "pkg/test_calc.py": TEST_CALC.replace("from calc", "from pkg.calc")}),
    "a folder with spaces and non-ASCII letters": ("Mein Projekt ü", {
        "pyproject.toml": '[project]\nname = "x"\n', "calc.py": CALC_BUG, "prüfungen/test_calc.py": TEST_CALC}),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_common_layouts_are_found_and_gate_the_fix(tmp_path: Path, run_keel, layout: str):
    folder, files = LAYOUTS[layout]
    repo = make_repo(tmp_path / folder, files)
    plan = run_keel("checks", "--cwd", str(repo), "--json", timeout=60)
    assert '"category": "test"' in plan.stdout and "pytest" in plan.stdout, plan.stdout + plan.stderr
    target = next(p for p in files if files[p] == CALC_BUG)
    fix = call("edit_file", path=target, old_text="return a - b", new_text="return a + b")
    wrong = call("edit_file", path=target, old_text="return a - b", new_text="return a * b")
    script = [{"tool_calls": [wrong]}, {"content": "Fixed."}, {"tool_calls": [call("edit_file", path=target,
              old_text="return a * b", new_text="return a + b")]}, {"content": "add() adds now."}]
    assert fix["arguments"]
    r, left = run(run_keel, repo, "fix add()", script)
    assert pushback_kinds(r) == ["verification_failed"], r.result     # the wrong fix is caught by the tests
    assert (r.result["status"], r.result["verification"]["status"]) == ("complete", "passed") and left == 0


# -- no plan: the agent's own whole test run is the evidence -----------------------------------------------
@pytest.fixture
def unplanned_repo(tmp_path: Path) -> Path:
    """pytest.ini names check_*.py as the test files: keel plans nothing, pytest runs them."""
    return make_repo(tmp_path / "odd", {"pytest.ini": "[pytest]\npython_files = check_*.py\n", "calc.py": CALC_BUG,
                                        "check_calc.py": TEST_CALC})


@pytest.mark.parametrize(("command", "counts"), [
    ("python3 -m pytest -q", True),
    ("python3 -m pytest -q -k add", False),            # a selection is no evidence for the rest
    ("python3 -m pytest -q check_calc.py", False),     # nor is one file
])
def test_without_a_plan_only_a_whole_test_run_counts(unplanned_repo: Path, run_keel, command: str, counts: bool):
    script = [{"tool_calls": [FIX]}, {"tool_calls": [call("run_shell", command=command)]},
              {"content": "Fixed add()."}, {"tool_calls": [call("run_shell", command="python3 -m pytest -q")]},
              {"content": "Fixed add(); the whole suite passes."}]
    r, _ = run(run_keel, unplanned_repo, "fix add() in calc.py", script)
    assert r.result["verification"]["status"] == "no_checks"
    assert r.result["status"] == "complete"
    assert pushback_kinds(r) == ([] if counts else ["unverified"])


# -- item 6: attended modes do not tell the model nobody is there ------------------------------------------
def test_an_attended_run_is_told_a_person_is_present(bug_repo: Path, run_keel):
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": ANSWER}]
    for flags, present in ((("--attended",), True), ((), False)):
        with ScriptedEngineServer(script) as server:
            run_keel("run", "What does calc.py do?", "--cwd", str(bug_repo), "--base-url", server.base_url,
                     "--model", "scripted", *flags, timeout=120)
            first = server.requests[0]["messages"][1]["content"]
        assert ("No one is available" in first) is not present, first
        assert ("A person is present" in first) is present


def test_the_library_agent_of_the_repl_and_acp_is_told_so_too(bug_repo: Path):
    """The REPL and `keel acp` build Agent(attended=True); its first message is the one the model reads."""
    from keel.agent import Agent
    from keel.engine.client import OpenAICompatEngine

    with ScriptedEngineServer([{"content": ANSWER}]) as server:
        agent = Agent(OpenAICompatEngine(server.base_url, "scripted"), workspace=bug_repo, attended=True,
                      log_path=False)
        result = agent.run("What does calc.py do?")
        first = server.requests[0]["messages"][1]["content"]
    assert "No one is available" not in first and "A person is present" in first
    assert result.status == "complete" and len(server.requests) == 1   # a question costs one model call


def test_the_first_message_says_a_question_is_answered_in_words(bug_repo: Path, run_keel):
    """The system prompt (a small model's above all) speaks of changing files: a question says otherwise."""
    for task, note in (("What does calc.py do? Just explain.", True), ("fix add() in calc.py", False)):
        with ScriptedEngineServer([{"content": ANSWER}, {"content": ANSWER}]) as server:
            run_keel("run", task, "--cwd", str(bug_repo), "--base-url", server.base_url, "--model", "scripted",
                     "--max-steps", "2", timeout=120)
            first = server.requests[0]["messages"][1]["content"]
        assert ("This request asks for an answer, not a change" in first) is note, first


# -- an answer that clears the code (py-review-pagination on the 1.5B: "correct, no changes needed") --------
REVIEW = "Review calc.py and tell me what is wrong with it. Don't change any files."
EXPLAIN = "Explain what calc.py does. Don't change any files."
READ = {"tool_calls": [call("read_file", path="calc.py")]}
ALL_CLEAR = {"tool_calls": [call("finish", summary="calc.py is correct and does not need any changes.")]}
FOUND = {"tool_calls": [call("finish", summary="add() returns a - b: it subtracts, so add(2, 3) is -1, not 5.")]}


def test_asked_what_is_wrong_an_all_clear_whose_checks_fail_is_refused(bug_repo: Path, run_keel):
    r, left = run(run_keel, bug_repo, REVIEW, [READ, ALL_CLEAR, FOUND])
    assert pushback_kinds(r) == ["answer_contradicted"] and left == 0, r.stdout
    assert r.result["status"] == "complete" and "subtracts" in r.result["summary"]
    assert tracked_unchanged(bug_repo)


def test_an_all_clear_whose_checks_fail_is_refused(bug_repo: Path, run_keel):
    r, left = run(run_keel, bug_repo, EXPLAIN, [READ, ALL_CLEAR, FOUND])
    assert pushback_kinds(r) == ["answer_contradicted"] and left == 0, r.stdout
    assert r.result["status"] == "complete" and "subtracts" in r.result["summary"]


def test_an_all_clear_stays_refused_while_the_checks_fail(bug_repo: Path, run_keel):
    r, _ = run(run_keel, bug_repo, REVIEW, [READ, ALL_CLEAR, ALL_CLEAR, ALL_CLEAR, ALL_CLEAR])
    assert r.result["status"] == "incomplete" and r.result["stop_reason"] == "limit:verification", r.stdout
    assert pushback_kinds(r) == ["answer_contradicted", "answer_contradicted"]


# py-review-pagination on the 1.5B: the flaw is one the tests miss, so no check can contradict "it is correct".
PAGINATE = ('def paginate(items, page, per_page):\n    """Return the items on page `page`. Page numbers start at '
            '1."""\n    start = page * per_page\n    return items[start:start + per_page]\n')
TEST_PAGINATE = "from pagination import paginate\n\n\ndef test_size():\n    assert len(paginate(list(range(50)), 2, 10)) == 10\n"
REVIEW_PAGES = "Review pagination.py and tell me what is wrong with it. Don't change any files."
READ_PAGES = {"tool_calls": [call("read_file", path="pagination.py")]}
PAGES_CLEAR = {"tool_calls": [call("finish", summary="pagination.py is correct and does not need any changes.")]}
PAGES_FOUND = {"tool_calls": [call("finish", summary="start = page * per_page skips the first page: pages start "
                                                     "at 1, so it must be (page - 1) * per_page.")]}


@pytest.fixture
def pages_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "pages", {"pagination.py": PAGINATE, "test_pagination.py": TEST_PAGINATE})


def test_asked_what_is_wrong_an_all_clear_the_checks_cannot_refute_is_refused(pages_repo: Path, run_keel):
    """The request says there is a flaw; "correct, no changes needed" has nothing to rest on (the false done
    of py-review-pagination). Sent back, a flaw named ends complete."""
    r, left = run(run_keel, pages_repo, REVIEW_PAGES, [READ_PAGES, PAGES_CLEAR, PAGES_FOUND])
    assert pushback_kinds(r) == ["answer_unfounded"] and left == 0, r.stdout
    assert r.result["status"] == "complete" and "page - 1" in r.result["summary"]
    assert tracked_unchanged(pages_repo)


def test_an_all_clear_said_again_ends_incomplete_not_complete(pages_repo: Path, run_keel):
    r, left = run(run_keel, pages_repo, REVIEW_PAGES, [READ_PAGES, PAGES_CLEAR, PAGES_CLEAR, PAGES_CLEAR])
    assert r.result["status"] == "incomplete" and r.result["stop_reason"] == "limit:verification", r.stdout
    assert pushback_kinds(r) == ["answer_unfounded", "answer_unfounded"] and left == 0


def test_control_an_all_clear_to_an_open_question_stands(pages_repo: Path, run_keel):
    """Asked whether anything is wrong (not told that something is), an all-clear whose checks pass stands:
    looked at once more for a review, at once for an explanation."""
    r, left = run(run_keel, pages_repo, "Review pagination.py: are there any bugs? Don't change any files.",
                  [READ_PAGES, PAGES_CLEAR, PAGES_CLEAR])
    assert r.result["status"] == "complete" and pushback_kinds(r) == ["recheck_answer"] and left == 0, r.stdout
    r, left = run(run_keel, pages_repo, "Explain what pagination.py does. Don't change any files.",
                  [READ_PAGES, PAGES_CLEAR])
    assert r.result["status"] == "complete" and not pushback_kinds(r) and left == 0, r.stdout


def test_control_an_all_clear_of_code_whose_checks_pass_stands(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "ok", {"calc.py": CALC_BUG.replace("a - b", "a + b"), "test_calc.py": TEST_CALC})
    r, left = run(run_keel, repo, EXPLAIN, [READ, ALL_CLEAR])
    assert r.result["status"] == "complete" and not pushback_kinds(r) and left == 0, r.stdout


@pytest.mark.parametrize(("text", "asks", "presumes"), [
    ("Review pagination.py and tell me what is wrong with it.", True, True),
    ("What's wrong with parse()?", True, True),
    ("Find the bug in calc.py, don't fix it.", True, True),
    ("Why does parse() crash on an empty line?", True, True),
    ("Was ist an calc.py falsch?", True, True),
    ("Review calc.py: are there any bugs?", True, False),
    ("Is anything wrong with calc.py?", True, False),
    ("Review the pagination module.", True, False),
    ("Explain what calc.py does.", False, False),
    ("Why does parse() take a second argument?", False, False),
])
def test_what_asks_for_flaws_and_what_presumes_one(text: str, asks: bool, presumes: bool):
    from keel.core.request import parse_request

    request = parse_request(text)
    assert (request.asks_flaws, request.presumes_flaw) == (asks, presumes)


@pytest.mark.parametrize(("text", "clears"), [
    ("calc.py is correct and does not need any changes.", True),
    ("The code looks good to me; no issues found.", True),
    ("Nothing is wrong with paginate().", True),
    ("paginate() is correct, but page_count() is off by one.", False),    # a flaw named besides
    ("add() returns a - b instead of a + b.", False),
    ("There is a bug: start should be (page - 1) * per_page.", False),
    ("I found no problems in calc.py. Want me to add more tests?", True),  # the offer is dropped first
])
def test_what_clears_the_code(text: str, clears: bool):
    from keel.verify.answer import clears_the_code

    assert clears_the_code(text) is clears
