"""Failure summaries: parsers run on genuine output where the tool is installed here (pytest,
unittest, tracebacks, node --test, ruff, mypy, make), on short literal samples otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from keel.outputs.failure_parsers.python import DETAIL_LINES, DETAIL_TESTS, section_excerpt
from keel.outputs.summarize import (
    FailureSummary,
    failing_ids_new,
    summarize_failure,
    summarize_missing_output,
)

PY = sys.executable

PROJECT = {
    "pytest.ini": "[pytest]\n",
    "settings.py": "def load(d):\n    return d[\"port\"]\n",
    "test_app.py": (
        "import settings\n\n\ndef test_load():\n    assert settings.load({'port': 1}) == 2\n\n\n"
        "def test_port():\n    settings.load({})\n\n\ndef test_ok():\n    pass\n\n\n"
        "class TestX:\n    def test_msg(self):\n        assert 'abc' == 'abd', 'strings differ'\n"),
    "coll/test_bad.py": "import nosuchmod\n\n\ndef test_a():\n    pass\n",
    "fix/test_fix.py": ("import pytest\n\n\n@pytest.fixture\ndef f():\n    raise RuntimeError('fixture broke')\n\n\n"
                        "def test_f(f):\n    pass\n"),
    "empty/README": "no tests here\n",
    # Exercism's anagram, as keel's 1.5B run left it: unittest asserts under pytest, a message cut at 80 columns
    "cut/test_cut.py": (
        "import unittest\n\n\ndef find_anagrams(word, candidates):\n"
        "    return [c for c in candidates if sorted(c) == sorted(word)]\n\n\n"
        "class AnagramTest(unittest.TestCase):\n    def test_case_insensitive(self):\n"
        "        candidates = [\"cashregister\", \"Carthorse\", \"radishes\"]\n        expected = [\"Carthorse\"]\n"
        "        self.assertCountEqual(find_anagrams(\"Orchestra\", candidates), expected)\n\n"
        "    def test_ok(self):\n        self.assertEqual(find_anagrams(\"a\", [\"a\"]), [\"a\"])\n"),
    "ut/test_ut.py": (
        "import sys, unittest\nsys.path.insert(0, '..')\nimport settings\n\n\n"
        "class TestSettings(unittest.TestCase):\n    def test_load(self):\n"
        "        self.assertEqual(settings.load({'port': 1}), 2)\n\n    def test_port(self):\n"
        "        settings.load({})\n\n    def test_ok(self):\n        pass\n\n\n"
        "if __name__ == '__main__':\n    unittest.main()\n"),
    "app.py": "import settings\n\n\ndef main():\n    print(settings.load({'host': 1}))\n\n\nmain()\n",
    "broken.py": "def f(\n    return 1\n",
    "nd/app.test.js": (
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "test('adds numbers', () => { assert.strictEqual(1 + 1, 3); });\ntest('works', () => {});\n"
        "test.describe('suite', () => { test.it('inner thing', () => { throw new Error('boom inner'); }); });\n"),
    "lint/lint_me.py": "import os, sys\n\n\ndef f(x):\n    y = 1\n    return undefined_name\n",
    "typed/typed.py": "def f(x: int) -> str:\n    return x\n\n\nf('a')\n",
    "dt/dt.py": 'def f(x):\n    """\n    >>> f(1)\n    2\n    >>> f(2)\n    3\n    """\n    return x\n',
    "mk/Makefile": "test:\n\t@echo running the checks\n\t@echo 'widget count is 3, expected 4' >&2\n\t@exit 3\n",
}

# name -> (command, directory inside the project, tool that must be installed)
REAL_RUNS = {
    "pytest": (f"{PY} -m pytest test_app.py", ".", None),
    "pytest_short": (f"{PY} -m pytest -q --tb=short test_app.py", ".", None),
    "pytest_line": (f"{PY} -m pytest -q --tb=line -rN test_app.py", ".", None),
    "pytest_verbose_no_summary": (f"{PY} -m pytest -v -rN test_app.py", ".", None),
    "pytest_collect": (f"{PY} -m pytest -q coll", ".", None),
    "pytest_cut": (f"COLUMNS=80 {PY} -m pytest -q cut", ".", None),
    "pytest_fixture": (f"{PY} -m pytest -q fix", ".", None),
    "pytest_empty": (f"{PY} -m pytest -q empty", ".", None),
    "pytest_usage": (f"{PY} -m pytest -q nosuch_test.py", ".", None),
    "pytest_doctest": (f"{PY} -m pytest -q --doctest-modules dt.py", "dt", None),
    "doctest": (f"{PY} -m doctest dt.py", "dt", None),
    "unittest_module": (f"{PY} -m unittest test_ut", "ut", None),
    "unittest_script": (f"{PY} test_ut.py", "ut", None),
    "traceback": (f"{PY} app.py", ".", None),
    "traceback_c": (f"{PY} -c \"import settings; settings.load([])\"", ".", None),
    "syntax_error": (f"{PY} broken.py", ".", None),
    "node_tap": ("node --test", "nd", "node"),
    "node_spec": ("node --test --test-reporter=spec", "nd", "node"),
    "ruff": ("ruff check --no-cache --isolated lint_me.py", "lint", "ruff"),
    "ruff_concise": ("ruff check --no-cache --isolated --output-format=concise lint_me.py", "lint", "ruff"),
    "mypy": ("mypy --no-incremental typed.py", "typed", "mypy"),
    "make": ("make test", "mk", "make"),
    "not_found": ("nosuchcmd_keel_xyz --flag", ".", None),
}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, int, str]]:
    """Run every tool once, concurrently, on a tiny project; name -> (output, exit code, cwd)."""
    root = tmp_path_factory.mktemp("summarize")
    for rel, text in PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    # pytest stops cutting its short summary at the terminal's width when CI or BUILD_NUMBER is set
    # (_pytest.compat.running_on_ci): the tools here run as on a developer's terminal, in CI too.
    for name in ("CI", "BUILD_NUMBER"):
        env.pop(name, None)
    procs = {}
    for name, (command, sub, tool) in REAL_RUNS.items():
        if tool and shutil.which(tool) is None:
            continue
        cwd = root / sub
        procs[name] = (subprocess.Popen(command, shell=True, cwd=cwd, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT), str(cwd))
    out = {}
    for name, (proc, cwd) in procs.items():
        text, _ = proc.communicate(timeout=120)
        out[name] = (text, proc.returncode, cwd)
    return out


def summarize_real(real: dict[str, tuple[str, int, str]], name: str, **kw: object) -> FailureSummary:
    if name not in real:
        pytest.skip(f"{REAL_RUNS[name][2]} is not installed")
    output, code, cwd = real[name]
    assert code != 0, output
    return summarize_failure(REAL_RUNS[name][0], output, code, workspace=cwd, **kw)  # type: ignore[arg-type]


# name -> (headline starts with, exact failing ids or None, locations that must be there, text that must show)
REAL_CASES = {
    "pytest": ("3 tests failed: test_app.py::test_load",
               ("test_app.py::test_load", "test_app.py::test_port", "test_app.py::TestX::test_msg"),
               ("test_app.py:5", "settings.py:2"), ("AssertionError: assert 1 == 2", "KeyError: 'port'",
                                                    "strings differ")),
    "pytest_short": ("3 tests failed", ("test_app.py::test_load", "test_app.py::test_port", "test_app.py::TestX::test_msg"),
                     ("settings.py:2",), ("KeyError: 'port'",)),
    "pytest_line": ("3 tests failed", None, ("settings.py:2", "test_app.py:5"), ("KeyError: 'port'",)),
    "pytest_verbose_no_summary": ("3 tests failed",
                                  ("test_app.py::test_load", "test_app.py::test_port", "test_app.py::TestX::test_msg"),
                                  ("settings.py:2",), ("KeyError: 'port'", "assert 1 == 2")),
    "pytest_collect": ("pytest could not collect coll/test_bad.py: ModuleNotFoundError: No module named 'nosuchmod'",
                       ("coll/test_bad.py",), ("coll/test_bad.py:1",), ()),
    "pytest_fixture": ("1 test failed: fix/test_fix.py::test_f", ("fix/test_fix.py::test_f",), ("fix/test_fix.py:6",),
                       ("ERROR fix/test_fix.py::test_f - RuntimeError: fixture broke",)),
    "pytest_empty": ("no tests ran", ("no tests ran",), (), ()),
    "pytest_usage": ("pytest ERROR: file or directory not found: nosuch_test.py", None, (), ()),
    "pytest_doctest": ("1 test failed: dt.py::dt.f", ("dt.py::dt.f",), ("dt.py:3",), ("expected 2, got 1",)),
    "doctest": ("2 doctest examples failed: dt.f: f(1), dt.f: f(2)", ("dt.f: f(1)", "dt.f: f(2)"),
                ("dt.py:3", "dt.py:5"), ("FAILED dt.f: f(2) - expected 3, got 2",)),
    "unittest_module": ("2 tests failed", ("test_ut.TestSettings.test_port", "test_ut.TestSettings.test_load"),
                        ("test_ut.py:8",), ("FAIL: test_ut.TestSettings.test_load - AssertionError: 1 != 2",
                                            "ERROR: test_ut.TestSettings.test_port - KeyError: 'port'", "Ran 3 tests")),
    "unittest_script": ("2 tests failed", ("__main__.TestSettings.test_port", "__main__.TestSettings.test_load"), (),
                        ("AssertionError: 1 != 2",)),
    "traceback": ("KeyError: 'port' at settings.py:2", ("settings.py: KeyError: 'port'",), ("settings.py:2",),
                  ("at app.py:5 in main: print(settings.load({'host': 1}))",)),
    "traceback_c": ("TypeError: list indices must be integers or slices, not str at settings.py:2", None,
                    ("settings.py:2",), ()),
    "syntax_error": ("SyntaxError: ", None, ("broken.py:1",), ()),
    "node_tap": ("2 tests failed: adds numbers, suite > inner thing", ("adds numbers", "suite > inner thing"),
                 ("app.test.js:3", "app.test.js:5"), ("2 !== 3", "boom inner")),
    "node_spec": ("2 tests failed: adds numbers, suite > inner thing", ("adds numbers", "suite > inner thing"),
                  ("app.test.js:3", "app.test.js:5"), ("2 !== 3", "boom inner")),
    "ruff": ("", None, ("lint_me.py:1", "lint_me.py:6"),
             ("problems in 1 file: lint_me.py:1:", "lint_me.py:1:8: F401 `os` imported but unused",
              "F821 Undefined name `undefined_name`")),
    "ruff_concise": ("", None, ("lint_me.py:1", "lint_me.py:6"),
                     ("lint_me.py:1:8: F401 `os` imported but unused",)),
    "mypy": ("2 problems in 1 file: typed.py:2: error: Incompatible return value type", None, ("typed.py:2", "typed.py:5"),
             ("Found 2 errors in 1 file",)),
    "make": ("make target 'test' failed (Error 3): widget count is 3, expected 4", None, (),
             ("running the checks",)),
    "not_found": ("command not found: nosuchcmd_keel_xyz", ("command not found: nosuchcmd_keel_xyz",), (), ()),
}


@pytest.mark.parametrize("name", list(REAL_CASES))
def test_real_tool_output(real, name):
    headline, ids, locations, shown = REAL_CASES[name]
    summary = summarize_real(real, name)
    assert summary.headline.startswith(headline), summary.text()
    if ids is not None:
        assert summary.failing_tests == ids, summary.text()
    assert summary.failing_tests, "a failure always has at least one id"
    for location in locations:
        assert location in summary.locations, summary.locations
    for text in shown:
        assert text in summary.text(), summary.text()
    assert len(summary.lines) <= 25 and all(len(line) <= 200 for line in summary.lines)
    assert "/" + Path(real[name][2]).name + "/" not in summary.text(), "absolute workspace paths are stripped"


def test_each_failing_pytest_test_keeps_its_inputs_and_its_whole_message(real):
    """What a focused candidate is shown (keel.drive.check_text.each_failure). Exercism's anagram on the
    1.5B: pytest cut the short summary's message at 80 columns ("- AssertionError: ..."), and six rounds
    of candidates, each shown only that line, never saw which word the test passes or what it expects."""
    summary = summarize_real(real, "pytest_cut")
    output = real["pytest_cut"][0]
    assert not any(line.startswith("FAILED") and "Element counts" in line for line in output.splitlines()), \
        "the control: pytest's own summary line does not carry the message"
    test = "cut/test_cut.py::AnagramTest::test_case_insensitive"
    assert f"FAILED {test} - AssertionError: Element counts were not equal:" in summary.text()
    printed = dict(summary.details)[test]
    assert 'self.assertCountEqual(find_anagrams("Orchestra", candidates), expected)' in printed
    assert 'expected = ["Carthorse"]' in printed and "Second has 1:  'Carthorse'" in printed
    assert "self = <" not in printed and "test_ok" not in printed
    assert list(dict(summarize_real(real, "pytest").details)) == list(summarize_real(real, "pytest").failing_tests)


def test_the_lines_kept_per_failing_test_are_bounded_for_a_run_with_many_failures():
    sections = "".join(f"{'_' * 5} test_{i} {'_' * 5}\n\n    def test_{i}():\n>       assert {i} == -1\n"
                       f"E       assert {i} == -1\n\nt.py:{i}: AssertionError\n" for i in range(DETAIL_TESTS + 10))
    summary_lines = "".join(f"FAILED t.py::test_{i} - assert {i} == -1\n" for i in range(DETAIL_TESTS + 10))
    output = (f"{'=' * 10} FAILURES {'=' * 10}\n{sections}{'=' * 10} short test summary info {'=' * 10}\n"
              f"{summary_lines}{DETAIL_TESTS + 10} failed in 0.50s\n")
    summary = summarize_failure("pytest", output, 1)
    assert len(summary.failing_tests) == DETAIL_TESTS + 10
    assert [test for test, _ in summary.details] == [f"t.py::test_{i}" for i in range(DETAIL_TESTS)]
    assert dict(summary.details)["t.py::test_3"].splitlines()[:2] == ["    def test_3():", ">       assert 3 == -1"]


def test_a_long_pytest_section_keeps_the_test_down_to_its_failing_line_and_the_error():
    """A failure deep in a helper prints many frames: the test's own lines, the E lines and where it
    failed are what is kept, at most DETAIL_LINES."""
    frames = [f"    def helper_{i}(x):" if i % 2 else f">       return helper_{i + 1}(x)" for i in range(40)]
    section = ["", "    def test_deep():", "        value = 41", ">       assert helper_0(value) == 42", "",
               "test_deep.py:3: ", "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _", *frames,
               "E       RecursionError: too deep", "", "deep.py:40: RecursionError"]
    kept = section_excerpt(section)
    assert kept[:3] == ["    def test_deep():", "        value = 41", ">       assert helper_0(value) == 42"]
    assert kept[-2:] == ["E       RecursionError: too deep", "deep.py:40: RecursionError"]
    assert len(kept) <= DETAIL_LINES


def test_a_test_file_pytest_could_not_load_is_named_as_unloaded(real):
    """None of its tests ran: change_file's score weighs it above any count of failing tests."""
    assert summarize_real(real, "pytest_collect").unloaded == ("coll/test_bad.py",)
    assert summarize_real(real, "pytest").unloaded == ()


def test_real_lint_ids_leave_line_numbers_out(real):
    summary = summarize_real(real, "ruff_concise")
    assert "lint_me.py: F401 `os` imported but unused" in summary.failing_tests
    reported = [line for line in real["ruff_concise"][0].splitlines() if line.startswith("lint_me.py:")]
    assert len(summary.failing_tests) == len(reported) >= 4


def test_real_traceback_points_past_the_stdlib(real):
    """The innermost frame of `python -c` is the project's settings.py, not <string>."""
    summary = summarize_real(real, "traceback_c")
    assert summary.locations == ("settings.py:2",)


# -- literal samples for tools not installed here ------------------------------------------------------
GO_TEST = """\
--- FAIL: TestAdd (0.00s)
    calc_test.go:12: Add(2, 3) = -1; want 5
--- FAIL: TestSub (0.00s)
    --- FAIL: TestSub/negative (0.00s)
        calc_test.go:20: Sub(-1, 1) = 0; want -2
FAIL
FAIL\texample.com/calc\t0.002s
FAIL
"""
GO_VERBOSE = """\
=== RUN   TestAdd
    calc_test.go:12: Add(2, 3) = -1; want 5
--- FAIL: TestAdd (0.00s)
=== RUN   TestOK
--- PASS: TestOK (0.00s)
FAIL
exit status 1
FAIL\texample.com/calc\t0.003s
"""
GO_BUILD = """\
# example.com/calc
./calc.go:5:9: undefined: sub
FAIL\texample.com/calc [build failed]
FAIL
"""
GO_PANIC = """\
--- FAIL: TestIndex (0.00s)
panic: runtime error: index out of range [5] with length 3 [recovered]
\tpanic: runtime error: index out of range [5] with length 3

goroutine 7 [running]:
testing.tRunner.func1.2({0x5150a0, 0xc000016108})
\t/usr/local/go/src/testing/testing.go:1545 +0x238
example.com/calc.Get(...)
\t/home/me/calc/calc.go:8
example.com/calc.TestIndex(0x0?)
\t/home/me/calc/calc_test.go:30 +0x1d
FAIL\texample.com/calc\t0.004s
"""
CARGO_TEST = """\
   Compiling rs v0.1.0 (/tmp/rs)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 1.08s
     Running unittests src/lib.rs (target/debug/deps/rs-a35a48c092d3f767)

running 3 tests
test tests::ok ... ok
test tests::adds ... FAILED
test tests::panics ... FAILED

failures:

---- tests::adds stdout ----

thread 'tests::adds' (10061) panicked at src/lib.rs:6:17:
assertion `left == right` failed
  left: -1
 right: 5
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace

---- tests::panics stdout ----

thread 'tests::panics' panicked at 'index out of bounds: the len is 0 but the index is 3', src/lib.rs:10:54


failures:
    tests::adds
    tests::panics

test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.16s

error: test failed, to rerun pass `--lib`
"""
CARGO_BUILD = """\
   Compiling rs v0.1.0 (/tmp/rs)
warning: unused variable: `x`
 --> src/main.rs:2:9
  |
2 |     let x = 1;
  |         ^ help: if this is intentional, prefix it with an underscore: `_x`

error[E0425]: cannot find value `c` in this scope
 --> src/lib.rs:1:41
  |
1 | pub fn add(a: i32, b: i32) -> i32 { a - c }
  |                                         ^
error: could not compile `rs` (lib test) due to 1 previous error
"""
JEST = """\
 FAIL  src/sum.test.js
  Suite
    \u2715 adds (3 ms)
    \u2713 ok (1 ms)

  \u25cf Suite \u203a adds

    expect(received).toBe(expected) // Object.is equality

    Expected: 3
    Received: 2

      3 |   test('adds', () => {
    > 4 |     expect(sum(1, 1)).toBe(3);
        |                       ^
      5 |   });

      at Object.toBe (src/sum.test.js:4:23)

Test Suites: 1 failed, 1 total
Tests:       1 failed, 1 passed, 2 total
"""
VITEST = """\
 \u276f src/sum.test.ts (2 tests | 1 failed) 5ms
   \u00d7 Suite > adds 3ms

\u23af\u23af\u23af\u23af\u23af\u23af\u23af Failed Tests 1 \u23af\u23af\u23af\u23af\u23af\u23af\u23af

 FAIL  src/sum.test.ts > Suite > adds
AssertionError: expected 2 to be 3 // Object.is equality

- Expected
+ Received

 \u276f src/sum.test.ts:4:23
      2| describe('Suite', () => {
      3|   it('adds', () => {
      4|     expect(sum(1, 1)).toBe(3)
       |                       ^

 Test Files  1 failed (1)
      Tests  1 failed | 1 passed (2)
"""
MOCHA = """\
  Array
    #indexOf()
      \u2714 should return -1 when the value is not present
      1) should find the value


  1 passing (5ms)
  1 failing

  1) Array
       #indexOf()
         should find the value:

      AssertionError [ERR_ASSERTION]: -1 == 0
      + expected - actual

      at Context.<anonymous> (test/array.test.js:9:14)
      at process.processImmediate (node:internal/timers:476:21)
"""
TSC = """\
src/app.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.
src/app.ts(9,1): error TS2304: Cannot find name 'foo'.
"""
TSC_PRETTY = """\
src/app.ts:3:7 - error TS2322: Type 'string' is not assignable to type 'number'.

3 const n: number = "x";
        ~

Found 1 error in src/app.ts:3
"""
PYRIGHT = """\
/home/me/proj/app.py
  /home/me/proj/app.py:2:12 - error: Type "int" is not assignable to return type "str"
1 error, 0 warnings, 0 informations
"""
ESLINT_STYLISH = """\

/home/me/proj/src/a.js
  1:10  error    'x' is defined but never used  no-unused-vars
  3:1   warning  Unexpected console statement   no-console

\u2716 2 problems (1 error, 1 warning)
"""
FLAKE8 = "app.py:1:1: F401 'os' imported but unused\napp.py:7:80: E501 line too long (91 > 79 characters)\n"
ESLINT_UNIX = "/home/me/proj/src/a.js:1:10: 'x' is defined but never used. [Error/no-unused-vars]\n"
MAKE_NO_RULE = "make: *** No rule to make target 'tset'.  Stop.\n"
MAKE_WRAPPING_PYTEST = ("============================= test session starts ==============================\n"
                        "=========================== short test summary info ============================\n"
                        "FAILED test_a.py::test_one - assert 1 == 2\n"
                        "========================= 1 failed in 0.02s ==========================\n"
                        "make: *** [Makefile:2: test] Error 1\n")
COLOURED = "\x1b[31mFAILED\x1b[0m test_a.py::test_one - \x1b[1mAssertionError\x1b[0m: boom\n1 failed in 0.1s\n"

# sample -> (output, exit code, headline starts with, exact failing ids or None, locations, text shown)
LITERAL_CASES = {
    "go_test": (GO_TEST, 1, "2 tests failed: TestAdd, TestSub/negative", ("TestAdd", "TestSub/negative"),
                ("calc_test.go:12", "calc_test.go:20"), ("Add(2, 3) = -1; want 5",)),
    "go_verbose": (GO_VERBOSE, 1, "1 test failed: TestAdd", ("TestAdd",), ("calc_test.go:12",), ("want 5",)),
    "go_build": (GO_BUILD, 1, "1 problem in 1 file: calc.go:5:9: undefined: sub", None, ("calc.go:5",),
                 ("FAIL example.com/calc [build failed]",)),
    "go_panic": (GO_PANIC, 1, "1 test failed: TestIndex", ("TestIndex",), ("/home/me/calc/calc.go:8",),
                 ("panic: runtime error: index out of range",)),
    "cargo_test": (CARGO_TEST, 101, "2 tests failed: tests::adds, tests::panics", ("tests::adds", "tests::panics"),
                   ("src/lib.rs:6", "src/lib.rs:10"), ("assertion `left == right` failed; left: -1; right: 5",
                                                       "index out of bounds")),
    "cargo_build": (CARGO_BUILD, 101, "1 problem in 1 file: src/lib.rs:1:41: error[E0425]", None, ("src/lib.rs:1",),
                    ()),
    "jest": (JEST, 1, "1 test failed: src/sum.test.js \u203a Suite \u203a adds", ("src/sum.test.js \u203a Suite \u203a adds",),
             ("src/sum.test.js:4",), ("Expected: 3 Received: 2",)),
    "vitest": (VITEST, 1, "1 test failed: src/sum.test.ts > Suite > adds", ("src/sum.test.ts > Suite > adds",),
               ("src/sum.test.ts:4",), ("expected 2 to be 3",)),
    "mocha": (MOCHA, 1, "1 test failed: Array #indexOf() should find the value",
              ("Array #indexOf() should find the value",), ("test/array.test.js:9",), ("-1 == 0",)),
    "tsc": (TSC, 2, "2 problems in 1 file: src/app.ts:3:7: error TS2322", None, ("src/app.ts:3", "src/app.ts:9"), ()),
    "tsc_pretty": (TSC_PRETTY, 2, "1 problem in 1 file: src/app.ts:3:7: error TS2322", None, ("src/app.ts:3",), ()),
    "pyright": (PYRIGHT, 1, "1 problem in 1 file: /home/me/proj/app.py:2:12: error: Type", None, (), ()),
    "eslint_stylish": (ESLINT_STYLISH, 1, "2 problems in 1 file", None, ("/home/me/proj/src/a.js:1",),
                       ("\u2716 2 problems (1 error, 1 warning)",)),
    "flake8": (FLAKE8, 1, "2 problems in 1 file: app.py:1:1: F401", ("app.py: F401 'os' imported but unused",
                                                                    "app.py: E501 line too long (91 > 79 characters)"),
               ("app.py:1", "app.py:7"), ()),
    "eslint_unix": (ESLINT_UNIX, 1, "1 problem in 1 file", None, ("/home/me/proj/src/a.js:1",), ()),
    "make_no_rule": (MAKE_NO_RULE, 2, "make: No rule to make target 'tset'", None, (), ()),
    "make_wrapping_pytest": (MAKE_WRAPPING_PYTEST, 2, "1 test failed: test_a.py::test_one", ("test_a.py::test_one",),
                             (), ("assert 1 == 2",)),
    "pytest_params_with_spaces": ("FAILED t.py::test_x[a b] - AssertionError: z\nFAILED t.py::C::test_y\n2 failed in 1s\n",
                                  1, "2 tests failed", ("t.py::test_x[a b]", "t.py::C::test_y"), (), ()),
    "ansi_colours": (COLOURED, 1, "1 test failed: test_a.py::test_one", ("test_a.py::test_one",), (),
                     ("AssertionError: boom",)),
    "generic_error_lines": ("building...\nstep 1 ok\nError: config file missing\nmore noise\n", 1,
                            "exited 1: Error: config file missing", ("Error: config file missing",), (), ()),
    "generic_tail": ("one\ntwo\nthree\n", 4, "exited 4; last output: three", None, (), ("one", "three")),
    "generic_silent": ("", 1, "exited 1 with no output", ("exited 1 with no output",), (), ()),
    "zsh_not_found": ("zsh: command not found: frob\n", 127, "command not found: frob", ("command not found: frob",),
                      (), ()),
    "jest_with_timing": (JEST.replace(" FAIL  src/sum.test.js", " FAIL  src/sum.test.js (5.2 s)"), 1,
                         "1 test failed: src/sum.test.js \u203a Suite \u203a adds", None, (), ()),
    "exit_127_unrecognised": ("", 127, "command not found: frobnicate", ("command not found: frobnicate",), (), ()),
}


@pytest.mark.parametrize("name", list(LITERAL_CASES))
def test_literal_samples(name):
    output, code, headline, ids, locations, shown = LITERAL_CASES[name]
    command = "frobnicate --all" if name == "exit_127_unrecognised" else "check"
    summary = summarize_failure(command, output, code)
    assert summary.headline.startswith(headline), summary.text()
    if ids is not None:
        assert summary.failing_tests == ids, summary.text()
    assert summary.failing_tests
    for location in locations:
        assert location in summary.locations, summary.locations
    for text in shown:
        assert text in summary.text(), summary.text()


def test_timeout_keeps_what_the_partial_output_shows():
    partial = "test_a.py::test_fast PASSED\ntest_a.py::test_broken FAILED\ntest_a.py::test_hangs "
    summary = summarize_failure("pytest -v", partial, None, timed_out=True)
    assert summary.headline.startswith("timed out; 1 test failed: test_a.py::test_broken")
    assert summary.failing_tests == ("timed out", "test_a.py::test_broken")


def test_timeout_without_recognisable_output_shows_the_last_lines():
    summary = summarize_failure("python serve.py", "starting\nlistening on :8000\n", None, timed_out=True)
    assert summary.headline == "timed out"
    assert summary.lines == ("last output: starting", "last output: listening on :8000")


def test_many_failures_are_bounded_and_every_test_named_first():
    output = "".join(f"FAILED test_big.py::test_{i} - AssertionError: {'x' * 400}\n" for i in range(40))
    output += "40 failed in 1.0s\n"
    summary = summarize_failure("pytest", output, 1, max_lines=10)
    assert len(summary.lines) == 10
    assert summary.lines[-1].startswith("… ") and "more lines not shown" in summary.lines[-1]
    assert all(len(line) <= 200 for line in summary.lines)
    assert summary.headline == ("40 tests failed: test_big.py::test_0, test_big.py::test_1, test_big.py::test_2 "
                                "(+37 more)")
    assert len(summary.failing_tests) == 40


def test_detail_lines_give_way_to_test_names_when_cut():
    output = ("=================================== FAILURES ===================================\n"
              + "".join(f"___ test_{i} ___\n\n>   assert f({i})\nE   assert False\nE    +  where False = f({i})\n\n"
                        f"test_a.py:{i + 1}: AssertionError\n" for i in range(6))
              + "=========================== short test summary info ============================\n"
              + "".join(f"FAILED test_a.py::test_{i} - assert False\n" for i in range(6)))
    summary = summarize_failure("pytest", output, 1, max_lines=8)
    assert [line for line in summary.lines if line.startswith("FAILED")] == [
        f"FAILED test_a.py::test_{i} - assert False" for i in range(6)]


def test_missing_output():
    summary = summarize_missing_output("python test_app.py", "loading\ndone\n", "OK")
    assert summary.headline == "exited 0 but did not print 'OK'"
    assert summary.failing_tests == ("missing output: OK",)
    assert summary.lines[0] == "`python test_app.py` exited 0, but its output does not contain 'OK'"
    assert summary.lines[-2:] == ("  loading", "  done")
    assert "it printed nothing" in summarize_missing_output("python t.py", "", "OK").text()


@pytest.mark.parametrize(("before", "now", "new"), [
    (None, ("a::t1", "a::t2"), ("a::t1", "a::t2")),
    (("a::t1",), ("a::t1", "a::t2"), ("a::t2",)),
    (("a::t1", "a::t2"), ("a::t1",), ()),
    (("settings.py: KeyError: 'port'",), ("settings.py: KeyError: 'host'",), ("settings.py: KeyError: 'host'",)),
])
def test_failing_ids_new(before, now, new):
    assert failing_ids_new(before, now) == new


def test_ids_are_stable_across_runs_with_different_addresses_and_timings():
    one = summarize_failure("python app.py", "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n"
                            "    f()\nValueError: bad object at 0x7f6c11fbd260\n", 1)
    two = summarize_failure("python app.py", "Traceback (most recent call last):\n  File \"app.py\", line 9, in <module>\n"
                            "    f()\nValueError: bad object at 0x7f00deadbeef\n", 1)
    assert one.failing_tests == two.failing_tests == ("app.py: ValueError: bad object at 0x…",)
    assert failing_ids_new(one.failing_tests, two.failing_tests) == ()


def test_text_is_headline_then_indented_body():
    summary = FailureSummary("1 test failed: t", ("t",), ("a.py:1",), ("FAILED t - boom", "  at a.py:1"))
    assert summary.text() == "1 test failed: t\n  FAILED t - boom\n    at a.py:1"


def test_large_outputs_stay_linear():
    """A 2 MB log with 20,000 diagnostics once took a minute through a quadratic dedupe."""
    output = "".join(f"src/m{i % 300}.py:{i}:1: F401 `x{i}` imported but unused\n" for i in range(20000))
    started = time.perf_counter()
    summary = summarize_failure("ruff check", output, 1)
    assert time.perf_counter() - started < 15
    assert len(summary.failing_tests) == 20000 and len(summary.lines) == 25
