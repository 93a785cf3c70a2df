"""The documented bounds of a changed function, tried before and after the change (keel.verify.bounds): the
false done of js-off-by-one at bd2b06d, through `keel run` with the scripted engine over real HTTP, real
node and pytest runs in the real sandbox, each next to a control that must still end complete.

The 1.5B replaced daysInMonth()'s date arithmetic with a table of eleven months; the tests try months 1 to 4
and passed, and keel ended complete while daysInMonth(2023, 12) returned undefined.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import call, make_repo
from test_request_e2e import pushback_kinds, run

from keel.verify.bounds import bound_calls, literal_calls, ranges

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

CALENDAR = ('"use strict";\n\n/** Number of days in `month` (1 = January … 12 = December) of `year`. */\n'
            "function daysInMonth(year, month) {\n  return new Date(year, month - 1, 0).getDate();\n}\n\n"
            "module.exports = { daysInMonth };\n")
CALENDAR_TEST = ('"use strict";\nconst test = require("node:test");\nconst assert = require("node:assert");\n'
                 'const { daysInMonth } = require("./calendar.js");\n\n'
                 'test("february", () => { assert.strictEqual(daysInMonth(2023, 2), 28); });\n'
                 'test("april", () => { assert.strictEqual(daysInMonth(2024, 4), 30); });\n')
TASK = "February shows 31 days. Fix daysInMonth in calendar.js so the month lengths are right (months are 1–12)."
OLD = "return new Date(year, month - 1, 0).getDate();"
TABLE = ("const days = [31, year % 4 === 0 ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30];\n"
         "  return days[month - 1];")
RIGHT = "return new Date(year, month, 0).getDate();"
CHECKED = ('if (!Number.isInteger(month) || month < 1 || month > 12) throw new RangeError("month");\n'
           "  return new Date(year, month, 0).getDate();")


def edit(old: str, new: str) -> dict:
    return {"tool_calls": [call("edit_file", path="calendar.js", old_text=old, new_text=new)]}


FINISH = {"tool_calls": [call("finish", summary="daysInMonth in calendar.js now gives the right month lengths.")]}


@pytest.fixture
def calendar(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "cal", {"calendar.js": CALENDAR, "calendar.test.js": CALENDAR_TEST,
                                        "package.json": '{"name": "cal", "scripts": {"test": "node --test"}}\n'})


@needs_node
def test_a_fix_that_loses_december_is_refused(calendar: Path, run_keel):
    r, left = run(run_keel, calendar, TASK, [edit(OLD, TABLE), FINISH, edit(TABLE, RIGHT), FINISH])
    assert pushback_kinds(r) == ["verification_failed"] and left == 0, r.stdout
    pushed = next(e["pushback"] for e in r.events() if e.get("pushback_kind") == "verification_failed")
    assert "daysInMonth(2023, 12)" in pushed and "undefined" in pushed, pushed
    assert r.result["status"] == "complete"
    assert RIGHT in (calendar / "calendar.js").read_text()


@needs_node
def test_the_same_fix_said_again_never_ends_complete(calendar: Path, run_keel):
    r, _ = run(run_keel, calendar, TASK, [edit(OLD, TABLE), FINISH, FINISH, FINISH, FINISH])
    assert r.result["status"] == "incomplete", r.stdout


@needs_node
@pytest.mark.parametrize("fix", [RIGHT, CHECKED], ids=["right", "refuses-outside-the-range"])
def test_control_a_right_fix_ends_complete_without_pushback(calendar: Path, run_keel, fix: str):
    r, left = run(run_keel, calendar, TASK, [edit(OLD, fix), FINISH])
    assert r.result["status"] == "complete" and pushback_kinds(r) == [] and left == 0, r.stdout


HOURS = ('"""Opening hours."""\n\nLABELS = ["night"] * 6 + ["day"] * 12 + ["evening"] * 6\n\n\n'
         'def label(hour):\n    """The label of `hour` (0-23)."""\n    return LABELS[hour]\n')
HOURS_TEST = "from hours import label\n\n\ndef test_noon():\n    assert label(12) == 'day'\n"


def test_python_a_change_that_breaks_the_last_hour_is_refused(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "hours", {"hours.py": HOURS, "test_hours.py": HOURS_TEST})
    shorter = {"tool_calls": [call("edit_file", path="hours.py", old_text='["evening"] * 6',
                                   new_text='["evening"] * 5')]}
    back = {"tool_calls": [call("edit_file", path="hours.py", old_text='["evening"] * 5',
                                new_text='["late"] * 6')]}
    done = {"tool_calls": [call("finish", summary="label() in hours.py now says evening until 22.")]}
    r, left = run(run_keel, repo, "Change label() in hours.py so the last hours are labelled late.",
                  [shorter, done, back, done])
    assert pushback_kinds(r) == ["verification_failed"] and left == 0, r.stdout
    pushed = next(e["pushback"] for e in r.events() if e.get("pushback_kind") == "verification_failed")
    assert "label(23)" in pushed and "IndexError" in pushed, pushed
    assert r.result["status"] == "complete"


# -- the pure parts -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "found"), [
    ("months are 1–12", [(1, 12)]), ("`month` (1 = January … 12 = December)", [(1, 12)]),
    ("an hour (0-23)", [(0, 23)]), ("between 0 and 59", [(0, 59)]), ("from 1 to 7", [(1, 7)]),
    ("due 2024-05-05", []), ("version 1.2-3", []), ("12-1", []), ("pages 1..500000", []),
])
def test_ranges(text: str, found: list[tuple[int, int]]):
    assert ranges(text) == found


def test_bound_calls_put_each_end_in_the_arguments_inside_the_range():
    calls = literal_calls("daysInMonth", ["daysInMonth(2024, 2); daysInMonth(x, 3); other.daysInMonth(2024, 1)"])
    assert calls == [["2024", "2"]]          # a call with a variable is not a literal call; a method is another
    assert bound_calls("daysInMonth", calls, [(1, 12)]) == ["daysInMonth(2024, 1)", "daysInMonth(2024, 12)"]
    assert bound_calls("daysInMonth", [["2024", "13"]], [(1, 12)]) == []     # outside every range: never tried


# -- py-empty-input with the assists off: `if not durations_ms:` is true for [] and false for iter([]) --------
STATS = ('def summarize(durations_ms):\n    """count and mean of ``durations_ms`` (any iterable).\n\n'
         '    With no durations the count is 0 and the mean is None.\n    """\n    values = list(durations_ms)\n'
         '    return {"count": len(values), "mean": sum(values) / len(values)}\n')
STATS_TEST = ("from stats import summarize\n\n\ndef test_some():\n    assert summarize([1, 3]) == {'count': 2, 'mean': 2.0}\n"
              "\n\ndef test_none():\n    assert summarize([]) == {'count': 0, 'mean': None}\n")
EMPTY_TASK = "summarize() in stats.py crashes for an empty hour. Fix it as the docstring says."
GUARD_ARG = "    if not durations_ms:\n        return {'count': 0, 'mean': None}\n    values = list(durations_ms)\n"
GUARD_LIST = "    values = list(durations_ms)\n    if not values:\n        return {'count': 0, 'mean': None}\n"


def stats_edit(new: str, old: str = "    values = list(durations_ms)\n") -> dict:
    return {"tool_calls": [call("edit_file", path="stats.py", old_text=old, new_text=new)]}


STATS_DONE = {"tool_calls": [call("finish", summary="summarize() in stats.py gives count 0 and mean None when empty.")]}


def test_a_fix_that_takes_a_list_but_not_an_iterator_is_refused(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "stats", {"stats.py": STATS, "test_stats.py": STATS_TEST})
    r, left = run(run_keel, repo, EMPTY_TASK, [stats_edit(GUARD_ARG), STATS_DONE,
                                               stats_edit(GUARD_LIST, old=GUARD_ARG), STATS_DONE])
    assert pushback_kinds(r) == ["verification_failed"] and left == 0, r.stdout
    pushed = next(e["pushback"] for e in r.events() if e.get("pushback_kind") == "verification_failed")
    assert "summarize(iter([])) raises ZeroDivisionError" in pushed, pushed
    assert r.result["status"] == "complete"


def test_control_an_iterator_the_old_code_also_refused_is_not_held_against_the_change(tmp_path: Path, run_keel):
    """The pair is checked only where the code before the change gave the same for both (here: both
    raised), so a function that never took an iterator does not block an unrelated change."""
    once = STATS.replace("    values = list(durations_ms)\n", "    values = durations_ms\n")   # a list only
    repo = make_repo(tmp_path / "stats", {"stats.py": once, "test_stats.py": STATS_TEST.replace(
        "\n\ndef test_none():\n    assert summarize([]) == {'count': 0, 'mean': None}\n", "")})
    edit_ = {"tool_calls": [call("edit_file", path="stats.py", old_text='"count": len(values)',
                                 new_text='"count": int(len(values))')]}
    r, left = run(run_keel, repo, "Make the count in summarize() in stats.py an int.", [edit_, STATS_DONE])
    assert r.result["status"] == "complete" and pushback_kinds(r) == [] and left == 0, r.stdout
