"""Case loading, materializing and grading: real files, real git, real subprocesses."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from keel.eval.cases import CaseError, changed_files, grade, load_case, load_cases, materialize

FIXTURES = Path(__file__).parent / "fixtures" / "evals"
TOML = """title = "t"
category = "bugfix"
size = "small"
language = "python"
tags = ["x"]

[acceptance]
commands = ["true"]
"""


def make_case(root: Path, toml: str = TOML, task: str = "do it", files: dict[str, str] | None = None,
              setup: str | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "case.toml").write_text(toml)
    (root / "task.md").write_text(task)
    if files is not None:
        for name, text in files.items():
            (root / "repo" / name).parent.mkdir(parents=True, exist_ok=True)
            (root / "repo" / name).write_text(text)
    if setup is not None:
        (root / "setup.sh").write_text(setup)
    return root


@pytest.mark.parametrize("case_id", ["add-fn", "fix-sub", "false-done"])
def test_fixture_acceptance_fails_before_and_passes_with_the_reference_solution(tmp_path, case_id):
    case = load_case(FIXTURES / case_id)
    before = grade(case, materialize(case, tmp_path / "before"))
    after = grade(case, materialize(case, tmp_path / "after", with_solution=True))
    assert not before.passed and before.failures
    assert after.passed, after.summary()


def test_grade_reports_each_check_and_the_changed_files(tmp_path):
    case = load_case(FIXTURES / "fix-sub")
    ws = materialize(case, tmp_path / "ws", with_solution=True)
    # tampering with a protected test: the suite passes, the grade does not
    (ws / "test_mathx.py").write_text("import unittest\n\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n")
    (ws / "notes.txt").write_text("new file\n")
    g = grade(case, ws)
    assert not g.passed
    kinds = {(c.kind, c.target): c.passed for c in g.checks}
    assert kinds == {("must_change", "mathx.py"): True, ("must_not_change", "test_mathx.py"): False,
                     ("command", "python -m unittest -q"): True}
    assert g.changed_files == ("mathx.py", "notes.txt", "test_mathx.py")


def test_solution_delete_list_removes_files_and_bytecode_is_not_a_change(tmp_path):
    toml = TOML.replace('commands = ["true"]', 'commands = ["test ! -e old.py"]\nmust_change = ["old.py"]')
    root = make_case(tmp_path / "c", toml, files={"old.py": "x = 1\n", "keep.py": "import old\n"})
    (root / "solution").mkdir()
    (root / "solution" / ".delete").write_text("# stale module\nold.py\n")
    case = load_case(root)
    ws = materialize(case, tmp_path / "ws", with_solution=True)
    subprocess.run(["python", "-c", "import keep"], cwd=ws, capture_output=True)  # may write __pycache__
    assert changed_files(ws) == ["old.py"]
    assert grade(case, ws).passed


def test_setup_script_builds_the_workspace_before_the_initial_commit(tmp_path):
    root = make_case(tmp_path / "c", setup="mkdir -p pkg && echo 'VALUE = 1' > pkg/conf.py\n")
    case = load_case(root)
    ws = materialize(case, tmp_path / "ws")
    assert (ws / "pkg" / "conf.py").read_text() == "VALUE = 1\n"
    assert changed_files(ws) == []  # what setup.sh made is the starting state, not a change


def test_failing_setup_script_is_a_case_error_naming_the_script(tmp_path):
    root = make_case(tmp_path / "c", setup="echo broken >&2; exit 3\n")
    with pytest.raises(CaseError, match=r"setup\.sh: exited 3: broken"):
        materialize(load_case(root), tmp_path / "ws")


def test_acceptance_timeout_kills_the_command_and_what_it_started(tmp_path):
    toml = TOML.replace('commands = ["true"]', 'commands = ["sleep 30 & echo started; wait"]\ntimeout_s = 1')
    case = load_case(make_case(tmp_path / "c", toml, files={"a.py": ""}))
    started = time.monotonic()
    g = grade(case, materialize(case, tmp_path / "ws"))
    assert time.monotonic() - started < 10
    assert not g.passed and g.checks[0].detail.startswith("timed out after 1s")
    assert "started" in g.checks[0].detail


@pytest.mark.parametrize(("toml", "message"), [
    (TOML.replace('category = "bugfix"', 'category = "chore"'),
     r"case\.toml: field 'category' must be one of feature, bugfix, refactor, tests, question, review, got 'chore'"),
    (TOML.replace('commands = ["true"]', "commands = []"), r"'acceptance\.commands' must list at least one"),
    (TOML.replace('commands = ["true"]', 'commands = ["true"]\nmust_change = ["../x"]'),
     r"'acceptance\.must_change' holds '\.\./x'"),
    (TOML.replace('commands = ["true"]', 'commands = ["true"]\ntimeout_s = 0'), r"'acceptance\.timeout_s' must be"),
    (TOML.replace('title = "t"', 'titel = "t"'), r"unknown field\(s\) titel"),
    (TOML.replace("[acceptance]\ncommands = [\"true\"]\n", ""), r"missing table \[acceptance\]"),
    ("title = ", r"case\.toml: not valid TOML"),
])
def test_bad_case_toml_names_file_and_field(tmp_path, toml, message):
    root = make_case(tmp_path / "c", toml, files={"a.py": ""})
    with pytest.raises(CaseError, match=message):
        load_case(root)


def test_missing_task_and_missing_repo_are_named(tmp_path):
    root = make_case(tmp_path / "c", task="  \n", files={"a.py": ""})
    with pytest.raises(CaseError, match=r"task\.md: empty"):
        load_case(root)
    with pytest.raises(CaseError, match=r"needs repo/ or setup\.sh"):
        load_case(make_case(tmp_path / "d"))


def test_selectors_pick_by_id_glob_category_tag_and_path_and_typos_fail():
    assert [c.id for c in load_cases(FIXTURES)] == ["add-fn", "false-done", "fix-sub"]
    assert [c.id for c in load_cases(FIXTURES, ["category:bugfix"])] == ["fix-sub"]
    assert [c.id for c in load_cases(FIXTURES, ["tag:false-done", "add-*"])] == ["add-fn", "false-done"]
    assert [c.id for c in load_cases(FIXTURES, [str(FIXTURES / "fix-sub")])] == ["fix-sub"]
    with pytest.raises(CaseError, match="no case matches 'fix-sbu'"):
        load_cases(FIXTURES, ["fix-sbu"])
