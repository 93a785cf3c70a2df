"""The verification gate's pure parts: which failures block a claim, and how the decider judges claims.

Table-driven, no I/O: the runner's verifier is replaced by GateFacts built by hand, exactly the
facts the decider receives in a real run.
"""

from __future__ import annotations

import dataclasses

import pytest

from keel.core.request import parse_request
from keel.core.state import TaskState
from keel.loop.decider import TurnOutcome, decide
from keel.loop.limits import Consumed, Limits
from keel.verify.contract import Promise
from keel.verify.gate import Baseline, CheckOutcome, GateFacts, render_feedback, split_failures
from keel.verify.plan import CheckSet, PlannedCheck

LINT = PlannedCheck("static", "ruff check .", "pyproject has [tool.ruff]")
TESTS = PlannedCheck("test", "python -m pytest -q", "tests/ exists")
ACCEPT = PlannedCheck("acceptance", "python test_app.py", "named by the task", source="task",
                      protects=("test_app.py",), expect_output="OK")


def ran(check: PlannedCheck, code: int, failing: tuple[str, ...] = (), output_ok: bool = True) -> CheckOutcome:
    return CheckOutcome(check, code, 0.1, "d1", output_ok=output_ok, failing_tests=failing,
                        summary="" if code == 0 else f"{check.command} failed")


def facts(*results: CheckOutcome, baseline: Baseline | None = None, unchanged: bool = False,
          kind: str = "change", tampered: tuple[str, ...] = ()) -> GateFacts:
    task = {"change": "add a helper", "answer": "what does the helper do?", "verify": "make sure it works"}[kind]
    blocking, pre = split_failures(results, baseline, unchanged=unchanged, request=parse_request(task))
    return GateFacts("d1", results, blocking, pre, tampered=tampered, unchanged=unchanged,
                     kind=kind, feedback=render_feedback(blocking, pre))


ADD = "add a mul(a, b) function to calc.py"
PROMISE = Promise("f", "a.py", "Twice n. A negative n raises ValueError.", ("A negative n raises ValueError.",))
OLD_FAILURE = Baseline("d0", {"python -m pytest -q": ("test_x.py::test_old",)})

SPLIT_CASES = [
    # id, results, baseline, unchanged, whether the task asks for a change, task, blocking, preexisting
    ("all pass", (ran(LINT, 0), ran(TESTS, 0)), None, False, True, ADD, [], []),
    ("failing test, no baseline", (ran(TESTS, 1),), None, False, True, ADD, ["python -m pytest -q"], []),
    ("same failure as at baseline", (ran(TESTS, 1, ("test_x.py::test_old",)),), OLD_FAILURE, False, True, ADD,
     [], ["python -m pytest -q"]),
    ("a new failure on top of the old one", (ran(TESTS, 1, ("test_x.py::test_old", "test_y.py::test_new")),),
     OLD_FAILURE, False, True, ADD, ["python -m pytest -q"], []),
    ("old failure, nothing changed, change asked", (ran(TESTS, 1, ("test_x.py::test_old",)),), OLD_FAILURE,
     True, True, ADD, ["python -m pytest -q"], []),
    ("old failure, nothing changed, question task", (ran(TESTS, 1, ("test_x.py::test_old",)),), OLD_FAILURE,
     True, False, "what does add() do?", [], ["python -m pytest -q"]),
    ("passed at baseline, fails now", (ran(LINT, 1),), Baseline("d0", {}, frozenset({"ruff check ."})), False,
     True, ADD, ["ruff check ."], []),
    ("acceptance always blocks", (ran(ACCEPT, 1),), Baseline("d0", {"python test_app.py": ()}), False, True, ADD,
     ["python test_app.py"], []),
    ("acceptance exits 0 without the expected output", (ran(ACCEPT, 0, output_ok=False),), None, False, True, ADD,
     ["python test_app.py"], []),
    ("the task is about that failing test", (ran(TESTS, 1, ("test_x.py::test_old",)),), OLD_FAILURE, False,
     True, "fix the failing test", ["python -m pytest -q"], []),
    ("the task names the failing test's subject", (ran(TESTS, 1, ("test_parser.py::test_quotes",)),),
     Baseline("d0", {"python -m pytest -q": ("test_parser.py::test_quotes",)}), False, True,
     "handle quotes in the parser", ["python -m pytest -q"], []),
    ("a question about the failing test changes nothing", (ran(TESTS, 1, ("test_x.py::test_old",)),),
     OLD_FAILURE, True, False, "Why does the failing test fail? Only explain.", [], ["python -m pytest -q"]),
    ("a bug report is about the failing test", (ran(TESTS, 1, ("test.js: AssertionError",)),),
     Baseline("d0", {"python -m pytest -q": ("test.js: AssertionError",)}), False, True, "fix add() in calc.js",
     ["python -m pytest -q"], []),
    ("a bug report with no 'fix' in it, once the agent changed something",
     (ran(TESTS, 1, ("test_pagination.py::test_first_page",)),),
     Baseline("d0", {"python -m pytest -q": ("test_pagination.py::test_first_page",)}), False, True,
     "page 1 returns page 2; paginate() in pagination.py is the culprit", ["python -m pytest -q"], []),
    ("the same report, nothing changed: a bug report asks for a change, so the old failure blocks",
     (ran(TESTS, 1, ("test_pagination.py::test_first_page",)),),
     Baseline("d0", {"python -m pytest -q": ("test_pagination.py::test_first_page",)}), True, True,
     "page 1 returns page 2; paginate() in pagination.py is the culprit", ["python -m pytest -q"], []),
    ("old lint failure, task about tests only", (ran(LINT, 1),), Baseline("d0", {"ruff check .": ()}), False,
     True, "make the failing test pass", [], ["ruff check ."]),
    ("a refused check is no evidence either way",
     (CheckOutcome(TESTS, None, 0.0, "d1", refused="needs approval"),), None, False, True, ADD, [], []),
    ("a refused acceptance check blocks: the task cannot be verified",
     (CheckOutcome(ACCEPT, None, 0.0, "d1", refused="denied"),), None, False, True, ADD, ["python test_app.py"], []),
]


@pytest.mark.parametrize(("results", "baseline", "unchanged", "asked", "task", "blocking", "pre"),
                         [c[1:] for c in SPLIT_CASES], ids=[c[0] for c in SPLIT_CASES])
def test_split_failures(results, baseline, unchanged, asked, task, blocking, pre):
    request = parse_request(task)
    assert request.asks_change is asked, (task, request.why)
    b, p = split_failures(results, baseline, unchanged=unchanged, request=request)
    assert [o.check.command for o in b] == blocking
    assert [o.check.command for o in p] == pre


def gate_state(*, rounds: dict[str, int] | None = None, changed: bool = True,
               own_check: tuple[str, int] | None = None, pushbacks: dict[str, int] | None = None,
               task: str = "fix it") -> TaskState:
    s = TaskState(task=task, gate_on=True)
    s.record_tool_call()
    if changed:
        s.record_file_change("app.py")
    if own_check is not None:
        s.record_check(own_check[0], own_check[1], "run")
    for k, v in (rounds or {}).items():
        s.repair_rounds[k] = v
    s.pushback_counts.update(pushbacks or {})
    return s


FINISH = TurnOutcome(tool_calls=1, progress=True, finished=True)
PROSE = TurnOutcome(text="You need to set the port key to 8081 in settings.json.")
L = Limits(max_steps=50, max_repair_rounds=2)
U = Consumed(steps=3)

DECIDE_CASES = [
    # id, outcome, facts, state, verdict, reason
    ("a claim without facts asks for verification", FINISH, None, gate_state(), "verify", "verify"),
    ("a prose claim too", PROSE, None, gate_state(changed=False), "verify", "verify"),
    ("passing checks complete", FINISH, facts(ran(TESTS, 0)), gate_state(), "stop", "complete"),
    ("failing checks push back", FINISH, facts(ran(TESTS, 1)), gate_state(), "continue", "verification_failed"),
    ("prose with nothing changed and a failing acceptance check", PROSE,
     facts(ran(ACCEPT, 1), unchanged=True), gate_state(changed=False), "continue", "no_change"),
    ("nothing changed, checks pass, a change was asked", PROSE, facts(ran(TESTS, 0), unchanged=True),
     gate_state(changed=False), "continue", "no_change"),
    ("nothing changed, checks pass, only an answer was asked", PROSE,
     facts(unchanged=True, kind="answer"), gate_state(changed=False, task="what does it do?"), "stop", "complete"),
    ("edited tests are refused", FINISH, facts(ran(TESTS, 0), tampered=("test_app.py",)), gate_state(),
     "continue", "tampered_tests"),
    ("repair rounds spent: stop", FINISH, facts(ran(TESTS, 1)), gate_state(rounds={"test": 2}), "stop",
     "limit:verification"),
    ("rounds are per category", FINISH, facts(ran(LINT, 1)), gate_state(rounds={"test": 2}), "continue",
     "verification_failed"),
    ("no-change rounds spent: stop", PROSE, facts(ran(TESTS, 0), unchanged=True),
     gate_state(changed=False, rounds={"no_change": 2}), "stop", "limit:verification"),
    ("nothing to run and no evidence of the agent's own", FINISH,
     GateFacts("d1", plan_empty=True), gate_state(), "continue", "unverified"),
    ("nothing to run: a check that runs the changed file counts", FINISH, GateFacts("d1", plan_empty=True),
     gate_state(own_check=("python app.py", 0)), "stop", "complete"),
    ("nothing to run: importing the changed module counts", FINISH, GateFacts("d1", plan_empty=True),
     gate_state(own_check=("python3 -c 'import app; assert app.f() == 2'", 0)), "stop", "complete"),
    ("nothing to run: a check that never touches the change is the model's word", FINISH,
     GateFacts("d1", plan_empty=True), gate_state(own_check=("python3 -c \"print('all good')\"", 0)),
     "continue", "unverified"),
    ("nothing to run: the changed file's run failed", FINISH, GateFacts("d1", plan_empty=True),
     gate_state(own_check=("python app.py", 1)), "continue", "unverified"),
    ("checks pass, the task makes a comment the spec: check it once", FINISH,
     dataclasses.replace(facts(ran(TESTS, 0)), contract=(PROMISE,)), gate_state(),
     "continue", "contract_review"),
    ("the comment was shown: the checks decide", FINISH,
     dataclasses.replace(facts(ran(TESTS, 0)), contract=(PROMISE,)),
     gate_state(pushbacks={"contract_review": 1}), "stop", "complete"),
    # keel issue 32: evidence for each kind of request
    ("every check fails as before and nothing else passed: no evidence", FINISH,
     facts(ran(TESTS, 1, ("test_x.py::test_old",)), baseline=OLD_FAILURE), gate_state(), "continue", "no_evidence"),
    ("…unless tests passed inside that run", FINISH,
     facts(dataclasses.replace(ran(TESTS, 1, ("test_x.py::test_old",)), tests_passed=3), baseline=OLD_FAILURE),
     gate_state(), "stop", "complete"),
    ("…or the agent's own run exercised the change", FINISH,
     facts(ran(TESTS, 1, ("test_x.py::test_old",)), baseline=OLD_FAILURE),
     gate_state(own_check=("python3 -c 'import app'", 0)), "stop", "complete"),
    ("no-evidence rounds spent: stop", FINISH, facts(ran(TESTS, 1, ("test_x.py::test_old",)), baseline=OLD_FAILURE),
     gate_state(rounds={"no_evidence": 2}), "stop", "limit:verification"),
    ("nothing to run, nothing changed, nothing asked to make sure of", PROSE, GateFacts("d1", plan_empty=True,
     unchanged=True, kind="verify"), gate_state(changed=False, task="run the slow job"), "stop", "complete"),
    ("nothing to run and a make-sure with no check of the agent's", PROSE, GateFacts("d1", plan_empty=True,
     unchanged=True, kind="verify"), gate_state(changed=False, task="make sure it works"), "continue", "unverified"),
    ("an answer with the workspace as it was", PROSE, facts(unchanged=True, kind="answer"),
     gate_state(changed=False, task="what port does the app use?"), "stop", "complete"),
    ("an answer-only request with a change", PROSE,
     dataclasses.replace(facts(kind="answer"), changed=("app.py",)),
     gate_state(task="what port does the app use?"), "continue", "changed_answer_only"),
    ("a promise to look is no answer", TurnOutcome(text="I will look at settings.json first."),
     None, gate_state(changed=False, task="what port does the app use?"), "continue", "no_answer"),
    ("an answer that ends with an offer is an answer", TurnOutcome(text="It uses 8081. Want me to change it?"),
     facts(unchanged=True, kind="answer"), gate_state(changed=False, task="what port does the app use?"),
     "stop", "complete"),
    ("failing checks come before the comment", FINISH,
     dataclasses.replace(facts(ran(TESTS, 1)), contract=(PROMISE,)), gate_state(),
     "continue", "verification_failed"),
]


@pytest.mark.parametrize(("outcome", "gate", "st", "verdict", "reason"), [c[1:] for c in DECIDE_CASES],
                         ids=[c[0] for c in DECIDE_CASES])
def test_decide_under_the_gate(outcome, gate, st, verdict, reason):
    if gate is not None:
        outcome = TurnOutcome(**{**outcome.__dict__, "verification": gate})
    d = decide(outcome, st, L, U, attended=False)
    assert (d.verdict, d.reason) == (verdict, reason)
    if verdict == "continue":
        assert d.pushback


def test_failure_pushback_carries_the_summary_and_the_log_path():
    failing = CheckOutcome(TESTS, 1, 0.3, "d1", failing_tests=("test_app.py::test_port",),
                           summary="FAILED test_app.py::test_port - KeyError: 'port'\ntest_app.py:7",
                           output_path="/data/checks/001-test.log")
    d = decide(TurnOutcome(**{**FINISH.__dict__, "verification": facts(failing)}), gate_state(), L, U,
               attended=False)
    assert "KeyError: 'port'" in d.pushback and "test_app.py:7" in d.pushback
    assert "/data/checks/001-test.log" in d.pushback and "root cause" in d.pushback


def test_plan_orders_categories():
    plan = CheckSet((ACCEPT, TESTS, LINT))
    assert [c.category for c in plan.ordered()] == ["static", "test", "acceptance"]


@pytest.mark.parametrize(("task", "expected"), [
    ("The app crashes with a KeyError when it loads settings.json. Find and fix the cause so that "
     "`python test_app.py` prints OK", True),
    ("Implement slugify() so that `python test_textutil.py` prints OK", True),
    ("make the failing test pass", True),
    ("rename foo to bar in a.py and b.py", True),
    ("add a docstring to add()", True),
    ("explain what calc.py does", False),
    ("What does add() return?", False),
    ("How would I fix this?", False),
    ("make sure the tests pass", False),
    ("list the files", False),
    ("", False),
    # a bug report with no change verb asks for the fix (measured: a false done on a 1.5B model)
    ("The list endpoint skips the first page of results: asking for page 1 returns what should be page 2. "
     "paginate() in pagination.py is the culprit, I think.", True),
    ("Checkout crashes when the cart is empty.", True),
    ("total() doesn't count the last item", True),
    ("parse_date returns the wrong month for ISO dates", True),
    # …but one that asks for an answer about the defect is answered
    ("Explain why the checkout crashes when the cart is empty", False),
    ("Why doesn't total() count the last item?", False),
    ("Why doesn't total() count the last item? Fix it.", True),
    ("Describe what is wrong with parse_date", False),
    ("The README describes the install steps.", True),      # no sign it asks only for an answer (issue 32)
    ("Can you fix add() in calc.py?", True),                   # a polite question with a change verb
    ("Could you add a sub() function?", True),
])
def test_task_requests_change(task, expected):
    request = parse_request(task)
    assert request.asks_change is expected, request.why


@pytest.mark.parametrize(("changed", "files", "expected"), [
    (["calc.py"], ["calc.py", "test_calc.py", "test_other.py"], ["test_calc.py"]),
    (["pkg/calc.py"], ["pkg/calc.py", "tests/test_calc.py", "tests/calc_test.py"],
     ["tests/calc_test.py", "tests/test_calc.py"]),
    (["tests/test_new.py"], ["tests/test_new.py", "calc.py"], ["tests/test_new.py"]),
    (["README.md"], ["README.md", "test_calc.py"], []),
    (["calc.py"], ["calc.py"], []),
])
def test_related_tests(changed, files, expected):
    from keel.verify.related import related_python_tests
    from keel.verify.snapshot import FileChange

    changes = [FileChange(p, "modified", 1, 1) for p in changed]
    assert related_python_tests(changes, files) == expected


@pytest.mark.parametrize(("command", "narrows"), [
    ("python -m pytest -q", True), ("python3 -m pytest", True), (".venv/bin/python -m pytest -q", True),
    ("pytest -q", True), ("pytest -q -k slow", False), ("make test", False), ("python test_app.py", False),
])
def test_only_plain_pytest_runs_are_narrowed(command, narrows):
    from keel.verify.related import narrows_by_path

    assert narrows_by_path(command) is narrows
