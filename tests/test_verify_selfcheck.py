"""The closing self-check: debug leftovers, stray files, unrelated changes, test tampering, change summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.core.request import parse_request
from keel.verify.selfcheck import (
    change_summary,
    debug_leftovers,
    is_test_file,
    render_changes,
    stray_files,
    tampered_tests,
    unrelated_changes,
)
from keel.verify.snapshot import FileChange, Snapshot, diff_snapshots, take_snapshot


def added(path: str, *lines: str, status: str = "modified", first: int = 10) -> FileChange:
    return FileChange(path, status, len(lines), 0, tuple(lines), tuple(range(first, first + len(lines))))  # type: ignore[arg-type]


def snap(files: dict[str, str]) -> Snapshot:
    return Snapshot(root="/w", files={p: str(hash(t)) for p, t in files.items()}, texts=dict(files))


# -- debug leftovers --------------------------------------------------------------------------------
LEFTOVERS = [
    ("py print in a library module", added("pkg/core.py", "    print(value)"), ["pkg/core.py:10: print(value)"]),
    ("py breakpoint anywhere", added("tests/test_a.py", "    breakpoint()"), ["tests/test_a.py:10: breakpoint()"]),
    ("import pdb", added("app.py", "import pdb; pdb.set_trace()"), ["app.py:10: import pdb; pdb.set_trace()"]),
    ("pdb.set_trace inline", added("lib.py", "    x = 1; pdb.set_trace()"), ["lib.py:10: x = 1; pdb.set_trace()"]),
    ("import ipdb", added("lib.py", "import ipdb"), ["lib.py:10: import ipdb"]),
    ("print in a test is output", added("test_app.py", "print('OK')"), []),
    ("print in a test dir", added("tests/helpers.py", "print(x)"), []),
    ("print in a script dir", added("scripts/release.py", "print('done')"), []),
    ("print in __main__.py", added("pkg/__main__.py", "print(main())"), []),
    ("print in a new script with a main guard",
     added("report.py", "def main():", "    print('hi')", "", "if __name__ == '__main__':", "    main()",
           status="added", first=1), []),
    ("commented print", added("pkg/core.py", "# print(value)"), []),
    ("pprint and method print are not print(", added("pkg/core.py", "self.print(x)", "pprint(x)"), []),
    ("console.log in JS library", added("src/util.ts", "  console.log(result);"), ["src/util.ts:10: console.log(result);"]),
    ("debugger statement", added("src/app.js", "  debugger;"), ["src/app.js:10: debugger;"]),
    ("console.log in a JS test", added("src/util.test.ts", "console.log(x)"), []),
    ("commented console.log", added("src/util.js", "// console.log(x)"), []),
    ("rust dbg!", added("src/lib.rs", "    let y = dbg!(x + 1);"), ["src/lib.rs:10: let y = dbg!(x + 1);"]),
    ("go Println in a library", added("calc/calc.go", "\tfmt.Println(a, b)"), ["calc/calc.go:10: fmt.Println(a, b)"]),
    ("go Println in package main",
     added("tool.go", "package main", "", "func main() {", "\tfmt.Println(\"hi\")", "}", status="added", first=1), []),
    ("go Println in cmd/", added("cmd/tool/run.go", "\tfmt.Println(x)"), []),
    ("print in a markdown file", added("README.md", "print(x)"), []),
    ("deleted file", FileChange("pkg/core.py", "deleted", 0, 3), []),
]


@pytest.mark.parametrize(("name", "change", "expected"), LEFTOVERS, ids=[c[0] for c in LEFTOVERS])
def test_debug_leftovers(name, change, expected):
    assert debug_leftovers([change]) == expected


def test_print_in_a_module_that_already_printed_is_by_design():
    after = snap({"pkg/cli_output.py": "def show(x):\n    print(x)\n\n\ndef more(y):\n    print(y)\n"})
    change = added("pkg/cli_output.py", "    print(y)", first=6)
    assert debug_leftovers([change], after) == []
    fresh = snap({"pkg/core.py": "def f(x):\n    print(x)\n    return x\n"})
    assert debug_leftovers([added("pkg/core.py", "    print(x)", first=2)], fresh) == ["pkg/core.py:2: print(x)"]


def test_debug_leftovers_on_a_real_diff(tmp_path: Path):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    before = take_snapshot(tmp_path)
    (tmp_path / "calc.py").write_text("def add(a, b):\n    print('debug', a, b)\n    breakpoint()\n    return a + b\n")
    changes = diff_snapshots(before, take_snapshot(tmp_path))
    assert debug_leftovers(changes) == ["calc.py:2: print('debug', a, b)", "calc.py:3: breakpoint()"]


# -- stray files -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "stray"), [
    ("calc.pyc", True), ("app.py.orig", True), ("app.py.rej", True), ("settings.json.bak", True),
    (".app.py.swp", True), ("nohup.out", True), ("core", True), ("server.log", True), ("pkg/.DS_Store", True),
    ("a.out", True), ("=", True), ("2", True), ("-", True), ("--verbose", True), ("out>err", True), ("app.py~", True),
    ("calc.py", False), ("test_calc.py", False), ("README.md", False), ("core.py", False), ("v2", False),
    ("logging.py", False),
])
def test_stray_files(path, stray):
    assert stray_files([FileChange(path, "added", 1, 0)]) == ([path] if stray else [])


def test_only_added_files_can_be_strays():
    assert stray_files([FileChange("old.log", "modified", 1, 1), FileChange("x.bak", "deleted", 0, 1)]) == []


# -- unrelated changes --------------------------------------------------------------------------------
SETTINGS_TASK = ("The app crashes with a KeyError when it loads settings.json. Find and fix the cause so that "
                 "`python test_app.py` prints OK")
UNRELATED = [
    ("named file", SETTINGS_TASK, ["settings.json"], []),
    ("stem named via another file", SETTINGS_TASK, ["settings.py"], []),
    ("same directory as a named file", SETTINGS_TASK, ["loader.py"], []),
    ("elsewhere", SETTINGS_TASK, ["docs/guide.md", "web/style.css"], ["docs/guide.md", "web/style.css"]),
    ("task names nothing", "make it faster", ["a.py", "b/c.py"], []),
    ("prose CamelCase names nothing", "port the JavaScript client to TypeScript", ["src/a.ts", "b.js"], []),
    ("test of a named file", "fix parse_date in src/dates.py", ["tests/test_dates.py", "src/dates.py"], []),
    ("named directory", "clean up src/api/ handlers", ["src/api/users.py", "lib/other.py"], ["lib/other.py"]),
    ("module path", "the bug is in keel.verify.gate", ["keel/verify/gate.py", "keel/loop/runner.py"],
     ["keel/loop/runner.py"]),
    ("package __init__ by package name", "fix `textutil`", ["textutil/__init__.py", "misc/x.py"], ["misc/x.py"]),
    ("added lines mention the identifier", "implement slugify() so that tests pass",
     ["lib/strings.py", "lib/other.py"], ["lib/other.py"]),
]


@pytest.mark.parametrize(("name", "task", "paths", "expected"), UNRELATED, ids=[c[0] for c in UNRELATED])
def test_unrelated_changes(name, task, paths, expected):
    changes = [added(p, "def slugify(text):" if p == "lib/strings.py" else "x = 1") for p in paths]
    assert unrelated_changes(changes, parse_request(task)) == expected


# -- tampering ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("task", "allows"), [
    ("add a test for the parser", True),
    ("write unit tests for slugify", True),
    ("update the tests to the new API", True),
    ("fix the tests", True),
    ("Fix the flaky test in test_net.py", True),
    ("change the test expectation for zero", True),
    ("update test_app.py to use the new fixture", True),
    ("the tests are outdated after the rename; bring the code and tests in line", True),
    ("write a failing test first, then fix the bug", True),
    ("update the failing test to the new message", True),
    # measured on the 1.5B (js-write-tests): "node:test" was no word, so the test file the task asks
    # for was protected, its candidates discarded and the change sent to duration.js
    ("Please write node:test tests for humanDuration() in test/duration.test.js", True),
    ("add pytest.mark.slow tests for the loader", True),
    ("write this: tests are not to change", False),
    ("make the failing test pass", False),
    ("fix test_app.py", False),
    ("fix the failing test", False),
    ("Fix the failing tests in test_app.py", False),
    ("implement slugify() so that `python test_textutil.py` prints OK", False),
    (SETTINGS_TASK, False),
    ("fix the bug so that the tests pass", False),
    ("add caching to the loader and test it", False),
    ("don't change the tests, fix the code", False),
    ("refactor the parser without modifying any tests", False),
    ("make sure `npm test` passes", False),
])
def test_task_allows_test_changes(task, allows):
    assert parse_request(task).allows_test_changes is allows


@pytest.mark.parametrize(("path", "is_test"), [
    ("test_app.py", True), ("pkg/calc_test.py", True), ("conftest.py", True), ("tests/data/input.json", True),
    ("src/util.test.ts", True), ("src/__tests__/a.js", True), ("web/app.spec.js", True), ("calc_test.go", True),
    ("test/helper.rb", True), ("app.py", False), ("testing.py", False), ("keel/testing/model.py", False),
    ("contest.py", False), ("latest.py", False),
])
def test_is_test_file(path, is_test):
    assert is_test_file(path) is is_test


BEFORE = {"test_app.py": "assert ok\n", "tests/test_b.py": "x\n", "app.py": "a\n", "check.sh": "run\n"}
TAMPER = [
    ("edited test", {**BEFORE, "test_app.py": "pass\n"}, set(), "fix app", ["test_app.py"]),
    ("deleted test", {k: v for k, v in BEFORE.items() if k != "tests/test_b.py"}, set(), "fix app", ["tests/test_b.py"]),
    ("rewritten with same bytes", dict(BEFORE), set(), "fix app", []),
    ("new test added", {**BEFORE, "tests/test_new.py": "y\n"}, set(), "fix app", []),
    ("library edit only", {**BEFORE, "app.py": "b\n"}, set(), "fix app", []),
    ("protected acceptance script", {**BEFORE, "check.sh": "exit 0\n"}, {"check.sh"}, "fix app", ["check.sh"]),
    ("task asks for test changes", {**BEFORE, "test_app.py": "pass\n"}, set(), "update the tests", []),
    ("several, sorted", {**BEFORE, "test_app.py": "", "tests/test_b.py": ""}, set(), "make the failing test pass",
     ["test_app.py", "tests/test_b.py"]),
]


@pytest.mark.parametrize(("name", "after", "protected", "task", "expected"), TAMPER, ids=[c[0] for c in TAMPER])
def test_tampered_tests(name, after, protected, task, expected):
    assert tampered_tests(snap(BEFORE), snap(after), protected, parse_request(task)) == expected


def test_overwriting_a_test_script_with_an_implementation_is_caught(tmp_path: Path):
    """The slugify case: the model overwrote test_textutil.py with the implementation."""
    (tmp_path / "textutil.py").write_text("def slugify(s):\n    raise NotImplementedError\n")
    (tmp_path / "test_textutil.py").write_text("from textutil import slugify\nassert slugify('A b') == 'a-b'\n"
                                               "print('OK')\n")
    before = take_snapshot(tmp_path)
    (tmp_path / "test_textutil.py").write_text("def slugify(s):\n    return s.lower().replace(' ', '-')\n")
    task = "implement slugify() so that `python test_textutil.py` prints OK"
    assert tampered_tests(before, take_snapshot(tmp_path), {"test_textutil.py"}, parse_request(task)) == \
        ["test_textutil.py"]


# -- change summary ------------------------------------------------------------------------------------
CHANGES = [
    FileChange("app.py", "modified", 8, 2, ("x",) * 8, tuple(range(1, 9))),
    FileChange("new.py", "added", 2, 0, ("a", "b"), (1, 2)),
    FileChange("old.py", "deleted", 0, 30),
    FileChange("logo.png", "modified", None, None),
]


def test_change_summary():
    summary = change_summary(CHANGES)
    assert summary["diffstat"] == "4 files changed, 10 insertions(+), 32 deletions(-)"
    assert summary["files"][0] == {"path": "app.py", "status": "modified", "added": 8, "removed": 2}
    assert summary["files"][3] == {"path": "logo.png", "status": "modified", "added": None, "removed": None}


@pytest.mark.parametrize(("changes", "diffstat"), [
    ([], "0 files changed"),
    ([FileChange("a.py", "modified", 1, 1)], "1 file changed, 1 insertion(+), 1 deletion(-)"),
    ([FileChange("a.py", "added", 3, 0)], "1 file changed, 3 insertions(+)"),
])
def test_diffstat_wording(changes, diffstat):
    assert change_summary(changes)["diffstat"] == diffstat


def test_render_changes():
    assert render_changes(CHANGES).splitlines() == [
        "M app.py (+8 -2)", "A new.py (+2)", "D old.py (-30)", "M logo.png (binary or large)"]
