"""The bundled evaluation cases in evals/: each is well formed, its acceptance discriminates (fails on the
starting repository, passes once the reference solution is applied), and its scripted trajectory solves
it through a real `keel run` (scripted engine over real HTTP, the verification gate on, real checks).

Acceptance runs as real subprocesses in fresh git workspaces. Every case's scripted run is part of the
README's test command (keel issue 32: with 4 of 28 run here, three stale scripts went unnoticed), ~5-15 s
each. Question and review cases are graded by their answer (keel.eval.cases.grade): it mentions what it
must and nothing changed; their reference answer is solution/ANSWER.md.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from keel.core.request import parse_request
from keel.eval.cases import ANSWERED, Case, grade, load_case, load_cases, materialize, run_command
from keel.policy.sandbox import detect_sandbox
from keel.testing.script import load_script
from keel.testing.server import ScriptedEngineServer

EVALS = Path(__file__).resolve().parent.parent / "evals"
CASES = load_cases(EVALS)
IDS = [c.id for c in CASES]
CHANGES = [c for c in CASES if c.category not in ANSWERED]


@pytest.fixture(autouse=True)
def no_pytest_plugin_autoload(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases need pytest alone; third-party plugins installed here (hypothesis, benchmark, anyio)
    cost ~2.5 s of CPU per pytest start, most of this module's time. Set before keel_env copies the
    environment, so the keel runs' checks start without them too."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def by_id(case_id: str) -> Case:
    return next(c for c in CASES if c.id == case_id)


def test_the_suite_has_the_promised_mix():
    assert len(CASES) >= 28, IDS
    assert set(Counter(c.category for c in CASES)) == {"feature", "bugfix", "refactor", "tests", "question",
                                                       "review"}
    assert set(Counter(c.size for c in CASES)) == {"small", "medium", "large"}
    languages = Counter(c.language for c in CASES)
    assert set(languages) == {"python", "javascript"} and languages["python"] > languages["javascript"] >= 4
    assert sum("small-window" in c.tags for c in CASES) >= 12
    web = [c for c in CASES if "web-api" in c.tags]
    assert web and all(len(list((c.path / "repo").rglob("*.py"))) >= 3 for c in web)


def test_small_window_cases_fit_an_8k_token_window():
    """Task, every starting file and the tool schemas must leave room to work in 8k tokens (~4 chars each)."""
    for case in (c for c in CASES if "small-window" in c.tags):
        chars = len(case.task) + sum(len(p.read_text()) for p in case.path.joinpath("repo").rglob("*")
                                     if p.is_file())
        assert chars < 6000, f"{case.id}: {chars} characters of task and files"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case_is_well_formed(case: Case):
    assert load_case(case.path) == case
    assert case.solution_dir is not None and case.repo_dir is not None
    assert case.script_path is not None
    steps = load_script(case.script_path)
    assert steps[-1].tool_calls and steps[-1].tool_calls[-1].name == "finish"
    called = [c.name for s in steps for c in s.tool_calls]
    if case.category in ANSWERED:   # answered in words: the script reads, never changes
        assert parse_request(case.task).answer_only, case.task
        assert (case.solution_dir / "ANSWER.md").is_file() and case.acceptance.answer_mentions
        assert not {"edit_file", "write_file", "run_shell"} & set(called)
        return
    assert case.acceptance.must_change, "a case must say which files its task changes"
    assert case.acceptance.must_not_change, "the tests (or the code under test) must be protected"
    repo_files = {p.relative_to(case.repo_dir).as_posix() for p in case.repo_dir.rglob("*") if p.is_file()}
    for path in case.acceptance.must_not_change:
        assert path in repo_files, f"must_not_change names {path}, which the repository does not have"
    assert "run_shell" in called and {"edit_file", "write_file"} & set(called)


@pytest.mark.parametrize("case", [c for c in CASES if c.category in ANSWERED],
                         ids=[c.id for c in CASES if c.category in ANSWERED])
def test_an_answer_is_graded_by_what_it_mentions_and_a_change_fails_it(case: Case, tmp_path: Path):
    assert case.solution_dir is not None
    reference = (case.solution_dir / "ANSWER.md").read_text()
    workspace = materialize(case, tmp_path / "ws")
    assert grade(case, workspace, reference).passed, grade(case, workspace, reference).summary()
    for wrong in ("", "I will look at the files first.", "It is a Python project with some functions and a test."):
        assert not grade(case, workspace, wrong).passed, f"{case.id}: {wrong!r} passed"
    first = sorted(p for p in workspace.iterdir() if p.suffix == ".py")[0]
    first.write_text(first.read_text() + "\n# changed\n")
    assert not grade(case, workspace, reference).passed, "a question answered by changing a file must fail"


@pytest.mark.parametrize("case", CHANGES, ids=[c.id for c in CHANGES])
def test_acceptance_fails_before_and_passes_after(case: Case, tmp_path: Path):
    before = materialize(case, tmp_path / "before")
    # The first failing command is enough: the rest need not run on the starting repository.
    fails = any(not run_command(cmd, before, case.acceptance.timeout_s).passed for cmd in case.acceptance.commands)
    assert fails, f"{case.id}: the acceptance commands already pass on the starting repository"
    after = grade(case, materialize(case, tmp_path / "after", with_solution=True))
    assert after.passed, f"{case.id}: the reference solution fails acceptance: {after.summary()}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_scripted_trajectory_solves_the_case_under_keel(case: Case, tmp_path: Path, run_keel):
    workspace = materialize(case, tmp_path / "ws")
    if "http" in case.tags and detect_sandbox().kind != "bubblewrap":
        # Landlock refuses every TCP connect/bind unless the network is approved (bubblewrap gives a
        # private loopback instead), so a case whose tests start a server needs that approval there.
        config = tmp_path / "xdg-config" / "keel" / "config.toml"   # the user config run_keel's env names
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("[shell]\nnetwork = true\n")
    assert case.script_path is not None
    with ScriptedEngineServer(case.script_path) as server:
        r = run_keel("run", "--task-file", str(case.path / "task.md"), "--cwd", str(workspace),
                     "--base-url", server.base_url, "--model", "scripted", "--output-format", "json",
                     "--max-steps", "30", timeout=240)
        unused = server.remaining
    assert r.code == 0, r.stdout[-3000:] + r.stderr[-3000:]
    status = "answered" if case.category in ANSWERED else "passed"
    assert r.result["stop_reason"] == "complete" and r.result["verification"]["status"] == status, r.result
    assert unused == 0, f"{case.id}: the run finished with {unused} scripted answers unused"
    graded = grade(case, workspace, r.result["summary"])
    assert graded.passed, f"{case.id}: keel said complete but acceptance fails (a false done): {graded.summary()}"


WRONG_FIRST_OFF_BY_ONE = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "pagination.py"}}]},
    {"tool_calls": [{"name": "edit_file", "arguments": {"path": "pagination.py", "old_text": "    start = page * per_page\n",
                                                        "new_text": "    start = page * per_page - 1\n"}}]},
    {"tool_calls": [{"name": "finish", "arguments": {"summary": "Fixed the off-by-one in paginate()."}}]},
    {"tool_calls": [{"name": "edit_file", "arguments": {"path": "pagination.py",
                                                        "old_text": "    start = page * per_page - 1\n",
                                                        "new_text": "    start = (page - 1) * per_page\n"}}]},
    {"tool_calls": [{"name": "finish", "arguments": {"summary": "paginate() starts page N at (N - 1) * per_page."}}]},
]


# A false done this suite found: the task names no "fix", so the gate filed the tests that failed before
# the edit as pre-existing and accepted a wrong fix that left them failing (keel/verify/gate.py _blocks).
def test_a_wrong_first_fix_of_a_bug_report_is_not_accepted(tmp_path: Path, run_keel):
    case = by_id("py-off-by-one")
    workspace = materialize(case, tmp_path / "ws")
    with ScriptedEngineServer(WRONG_FIRST_OFF_BY_ONE) as server:
        r = run_keel("run", "--task-file", str(case.path / "task.md"), "--cwd", str(workspace),
                     "--base-url", server.base_url, "--model", "scripted", "--output-format", "json",
                     timeout=240)
    graded = grade(case, workspace)
    false_done = r.result["stop_reason"] == "complete" and not graded.passed
    assert not false_done, f"keel completed with acceptance failing: {graded.summary()}"
    assert graded.passed, r.result


# Edits that make the visible tests pass without doing the task: acceptance must still fail them.
LAZY_FIXES: dict[str, dict[str, tuple[str | None, str]]] = {
    "py-wrong-operator": {"shipping.py": ("    if subtotal_cents > threshold_cents:\n",
                                          "    if subtotal_cents > 4999:\n")},
    "py-off-by-one": {"pagination.py": ("    start = page * per_page\n",
                                        "    start = page * per_page - 20 if per_page == 20 else page * per_page\n")},
    "py-rename-two-files": {"orders.py": ("def line_total(", "def order_total(lines, tax=True):\n"
                                          "    return calc_total(lines, tax)\n\n\ndef line_total(")},
    "py-config-key": {"settings.py": ('port=int(section.get("port"', 'port=int(section.get("prot"')},
    "py-rename-constant": {"settings.py": ("BACKOFF_S = 0.5", "MAX_RETRIES = MAX_RETRY\nBACKOFF_S = 0.5")},
    "py-bug-one-call-away": {"report.py": ("    for row in read_rows(text):\n",
                                           '    for row in read_rows(text if text.endswith("\\n") else text + "\\n"):\n')},
    "py-write-tests": {"test_leap.py": (None, "from leap import is_leap_year\n\n\ndef test_leap():\n"
                                              "    assert is_leap_year(2024) and not is_leap_year(2023)\n")},
    # the medium shapes (issue 36): a cent added where the symptom is, an alias for the old name, a
    # month taken back in the caller, answers for the tests' own inputs
    "py-discount-cent": {"checkout.py": ("    return percent_of(subtotal(lines), percent)\n",
                                         "    return percent_of(subtotal(lines), percent) + (code == \"STAFF30\")\n")},
    "py-rename-function": {"users/store.py": ("def by_email(", "find_user = get_user\n\n\ndef by_email(")},
    "js-rename-function": {"lib/money.js": ("module.exports = { fmtMoney, sumCents };",
                                            "module.exports = { fmtMoney, formatMoney: fmtMoney, sumCents };")},
    "js-due-date": {"src/invoice.js": ("  return formatDate(addDays(parseDate(invoice.issued), days));",
                                       "  const [y, m, d] = invoice.issued.split(\"-\").map(Number);\n"
                                       "  return formatDate(addDays(new Date(y, m - 1, d), days));")},
    "py-spec-instructions": {"rle.py": ("def encode(text):\n    pass\n",
                                        "def encode(text):\n    if any(c.isdigit() for c in text):\n"
                                        "        raise ValueError(text)\n"
                                        "    return {\"XYZ\": \"XYZ\", \"  hsqq qww  \": \"2 hs2q q2w2 \", \"\": \"\"}.get(\n"
                                        "        text, \"12WB12W3B24WB\")\n"),
                             "rle.py ": ("def decode(text):\n    pass\n",
                                         "def decode(text):\n    return \"\" if not text else \"W\" * 12 + \"B\" + \"W\" * 12 + "
                                         "\"BBB\" + \"W\" * 24 + \"B\"\n")},
    "js-off-by-one": {"calendar.js": ("  return new Date(year, month - 1, 0).getDate();",
                                      "  if (month === 2) return year % 4 === 0 ? 29 : 28;\n"
                                      "  return [4, 6, 9, 11].includes(month) ? 30 : 31;")},
}


@pytest.mark.parametrize("case_id", sorted(LAZY_FIXES))
def test_a_lazy_fix_that_passes_the_visible_tests_fails_acceptance(case_id: str, tmp_path: Path):
    case = by_id(case_id)
    workspace = materialize(case, tmp_path / "ws")
    for rel, (old, new) in LAZY_FIXES[case_id].items():
        target = workspace / rel.strip()   # a trailing space: a second edit of the same file
        if old is None:
            target.write_text(new)
        else:
            text = target.read_text()
            assert text.count(old) == 1, f"{case_id}: the lazy edit no longer applies to {rel}"
            target.write_text(text.replace(old, new))
    visible = run_command(case.acceptance.commands[0], workspace, case.acceptance.timeout_s)
    assert visible.passed, f"{case_id}: the lazy fix should pass the visible tests: {visible.detail}"
    assert not grade(case, workspace).passed, f"{case_id}: acceptance passed a fix that does not do the task"
