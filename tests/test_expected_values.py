"""expected_values (keel.drive.expect): asked for tests of code the task keeps, a rewrite's expected values
are what the code returns.

Measured on the 1.5B (py-write-tests): good inputs, wrong expectations (``is_leap_year(2023) == True``,
``== 365``); every rewrite and candidate failed on the kept code until the wall clock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_small

from keel.drive.expect import corrected, evaluation_command, expectations

LEAP = ('def is_leap_year(year):\n    """Leap years: divisible by 4, except centuries, except every 400th."""\n'
        '    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n\n\n'
        'def days_in_year(year):\n    return 366 if is_leap_year(year) else 365\n')
# The task's checker: the tests are good enough when they catch a mutant that forgets the 400 rule.
CHECK = ("import pathlib, subprocess, sys\n"
         "src = pathlib.Path('leap.py').read_text()\n"
         "pathlib.Path('leap.py').write_text(src.replace(' or year % 400 == 0', ''))\n"
         "try:\n"
         "    caught = subprocess.run([sys.executable, '-m', 'pytest', '-q', sys.argv[1]]).returncode != 0\n"
         "finally:\n"
         "    pathlib.Path('leap.py').write_text(src)\n"
         "sys.exit(0 if caught else 1)\n")
TASK = ("Write pytest tests for is_leap_year in test_leap.py, century rules too. Don't change leap.py. "
        "`python check.py test_leap.py` tells you whether the tests would catch real bugs.")
# what the 1.5B wrote: the right inputs, the wrong answers
WRONG = ("from leap import is_leap_year, days_in_year\n\n\n"
         "def test_common_year():\n    assert is_leap_year(2023) == True\n\n\n"
         "def test_days():\n    assert days_in_year(2023) == 366\n\n\n"
         "def test_centuries():\n    assert is_leap_year(2000) is False\n    assert not is_leap_year(1900)\n"
         "    assert is_leap_year(2024)\n")


def call(name: str, **args: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def run(ws: Path, script: list[dict[str, Any]], task: str = TASK, assists: bool = True) -> tuple[Any, list[dict]]:
    result, events, _ = run_small(ws, task, script, max_steps=len(script), callee_change=False,
                                  expected_values=assists)
    return result, events


@pytest.fixture
def leap(tmp_path: Path) -> Path:
    ws = tmp_path / "leap"
    ws.mkdir()
    (ws / "leap.py").write_text(LEAP)
    (ws / "check.py").write_text(CHECK)
    (ws / "test_days.py").write_text("from leap import days_in_year\n\n\ndef test_days():\n"
                                     "    assert days_in_year(2024) == 366\n")
    return ws


def _script(finishes: int = 1) -> list[dict[str, Any]]:
    return [call("change_file", path="test_leap.py", change="tests for is_leap_year, century rules too"),
            {"content": f"```python\n{WRONG}```\n"}, {"content": f"```python\n{WRONG}```\n"}] + \
        [call("finish", summary="tests written")] * finishes


def test_wrong_expectations_are_set_to_what_the_kept_code_returns(leap: Path) -> None:
    result, events = run(leap, _script())
    written = (leap / "test_leap.py").read_text()
    assert "assert is_leap_year(2023) == False" in written and "assert days_in_year(2023) == 365" in written
    assert "assert is_leap_year(2000) is True" in written and "assert not is_leap_year(1900)" in written
    assert "    assert is_leap_year(2024)\n" in written
    assert result.status == "complete", result.summary
    assert (leap / "leap.py").read_text() == LEAP
    acted = [e["detail"] for e in events if e["type"] == "assist" and e["name"] == "expected_values"]
    assert acted and "is_leap_year(2023): True -> False" in acted[0]
    assert subprocess.run([sys.executable, "check.py", "test_leap.py"], cwd=leap, capture_output=True).returncode == 0


def test_control_with_the_assist_off_the_wrong_tests_stay_and_fail(leap: Path) -> None:
    result, _ = run(leap, _script(3), assists=False)
    assert (leap / "test_leap.py").read_text() == WRONG
    assert result.status != "complete"


@pytest.mark.parametrize("task", [
    "Write pytest tests for is_leap_year in test_leap.py and fix what they find in leap.py.",
    "Write pytest tests for is_leap_year in test_leap.py. Don't change check.py.",   # another file kept
])
def test_a_task_that_does_not_keep_the_code_is_left_alone(leap: Path, task: str) -> None:
    """Tests asked for, the code they call not kept: a failing test may be the bug report, so nothing is set."""
    result, events = run(leap, _script(3), task=task)
    assert (leap / "test_leap.py").read_text() == WRONG
    assert not [e for e in events if e["type"] == "assist" and e["name"] == "expected_values"]


@pytest.mark.parametrize(("source", "calls"), [
    (WRONG, ["is_leap_year(2023)", "days_in_year(2023)", "is_leap_year(2000)", "is_leap_year(1900)",
             "is_leap_year(2024)"]),
    ("from m import f\n\n\ndef test_x():\n    y = 3\n    assert f(y) == 1\n", []),   # a test-local name
    ("from m import f\n\n\ndef test_x():\n    assert f(1) == len([1])\n", []),         # not a literal
    ("from m import f\n\n\ndef test_x():\n    assert 2 == f(1)\n", ["f(1)"]),          # either side
    ("from m import f\n\n\ndef test_x():\n    assert f(1) == (\n        2)\n", []),      # over two lines
    ("def broken(:\n", []),
])
def test_the_assertions_keel_can_check(source: str, calls: list[str]) -> None:  # Python
    assert [e.call for e in expectations(source)[0]] == calls


def _corrected(tmp_path: Path, source: str, path: str = "test_x.py") -> tuple[str, list[str]]:
    found, needs = expectations(source, path)
    out = subprocess.run(evaluation_command(needs, found, path), shell=True, cwd=tmp_path, capture_output=True,
                         text=True).stdout
    return corrected(source, found, out, path)


def test_what_changes_and_what_stays(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f(x):\n    return {'n': x}\n\n\ndef g(x):\n    return 1 / x\n\n\n"
                                   "def h():\n    return object()\n\n\ndef one():\n    return 1\n\n\n"
                                   "class Odd(Exception):\n    pass\n\n\ndef odd():\n    raise Odd()\n")
    source = ("from m import f, g, h, one, odd\n\n\ndef test_x():\n    assert f(2) == {'n': 3}\n    assert g(0) == 1\n"
              "    assert h() == 5\n    assert one() == 1\n    assert one() == True\n    assert odd() == 'é'\n")
    new, notes = _corrected(tmp_path, source)
    assert "assert f(2) == {'n': 2}" in new
    assert "    with pytest.raises(ZeroDivisionError): g(0)\n" in new and new.startswith("import pytest\n")
    assert "assert h() == 5" in new           # an object is no literal
    assert "assert one() == 1\n    assert one() == True\n" in new   # it holds already: left as written
    assert "assert odd() == 'é'" in new      # not a built-in error: pytest.raises would need an import
    assert notes == ["f(2): {'n': 3} -> {'n': 2}", "g(0): with pytest.raises(ZeroDivisionError): g(0)"]
    assert subprocess.run([sys.executable, "-m", "pytest", "-q", "-k", "not test_x"], cwd=tmp_path).returncode in (0, 5)


JS_CODE = ("'use strict';\nfunction humanDuration(s) {\n  if (!Number.isInteger(s) || s < 0) throw new RangeError('no');\n"
           "  return s === 0 ? '0s' : `${s}s`;\n}\nfunction parts(s) { return [s]; }\n"
           "module.exports = { humanDuration, parts };\n")
JS_TEST = ("'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert');\n"
           "const { humanDuration, parts } = require('../duration.js');\n\n"
           "test('zero', () => assert.strictEqual(humanDuration(0), '0 s'));\n"
           "test('negative', () => { assert.strictEqual(humanDuration(-1), '-1s'); });\n"
           "test('parts', () => assert.deepStrictEqual(parts(3), [4], 'message, stays'));\n"
           "test('same', () => assert.strictEqual(humanDuration(5), \"5s\"));\n"
           "test('local', () => { const x = 1; assert.strictEqual(humanDuration(x), '1s'); });\n")


def test_javascript_assertions_expect_what_the_code_does(tmp_path: Path) -> None:
    (tmp_path / "duration.js").write_text(JS_CODE)
    (tmp_path / "test").mkdir()
    new, notes = _corrected(tmp_path, JS_TEST, "test/duration.test.js")
    assert "assert.strictEqual(humanDuration(0), \"0s\")" in new
    assert "assert.throws(() => humanDuration(-1), RangeError);" in new
    assert "assert.deepStrictEqual(parts(3), [3], 'message, stays')" in new
    assert "assert.strictEqual(humanDuration(5), \"5s\")" in new           # holds: as written
    assert "humanDuration(x), '1s'" in new                                   # a local name: not run
    assert len(notes) == 3
    (tmp_path / "test" / "duration.test.js").write_text(new)
    ran = subprocess.run(["node", "--test", "test/duration.test.js"], cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout
