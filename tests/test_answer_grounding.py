"""An answer must rest on the project it is about (keel.verify.grounding): the three false dones of the 1.5B
with the assists off (the suite at be12010, docs/local.md), through `keel run` with the scripted engine over
real HTTP, real pytest runs and real files, each next to a control that must still end complete.

- py-question-project: "The project does what it is described in the files." names nothing of the project;
- py-frage-projekt: "The tests passed after the change. The command showed it works." with nothing changed;
- py-question-cause: a TypeError blamed while test_add fails on `assert -1 == 5`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import call, make_repo
from test_request_e2e import pushback_kinds, run, tracked_unchanged

from keel.core.request import parse_request
from keel.verify.answer import errors_blamed, names_project, project_stems, reports_change


def finish(summary: str) -> dict:
    return {"tool_calls": [call("finish", summary=summary)]}


WORDFREQ = ('"""Command line tool: print the most common words of a text file."""\n\nimport collections\n\n\n'
            "def top_words(text, n):\n    return collections.Counter(text.lower().split()).most_common(n)\n")
TEST_WORDFREQ = "from wordfreq import top_words\n\n\ndef test_top():\n    assert top_words('a a b', 1) == [('a', 2)]\n"
CONVERT = ('"""Umrechnung von Temperaturen."""\n\n\ndef celsius_to_fahrenheit(c):\n    return c * 9 / 5 + 32\n\n\n'
           "def fahrenheit_to_celsius(f):\n    return (f - 32) * 5 / 9\n")
TEST_CONVERT = "from convert import *\n\n\ndef test_roundtrip():\n    assert fahrenheit_to_celsius(celsius_to_fahrenheit(5)) == 5\n"
CALC_BUG = "def add(a, b):\n    return a - b\n"
CALC_TYPE = "def add(a, b):\n    return a + str(b)\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"

PROJECT = "What does this project do? Just explain, do not change anything."
EMPTY = "The project does what it is described in the files."
WHY = "Why does test_add in test_calc.py fail? Explain the cause, but do not change any file."


@pytest.fixture
def words_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "words", {"wordfreq.py": WORDFREQ, "test_wordfreq.py": TEST_WORDFREQ})


def test_an_answer_naming_nothing_of_the_project_is_refused(words_repo: Path, run_keel):
    good = "wordfreq.py is a command-line tool: top_words() counts the words of a text and prints the most common."
    r, left = run(run_keel, words_repo, PROJECT, [finish(EMPTY), finish(good)])
    assert pushback_kinds(r) == ["answer_ungrounded"] and left == 0, r.stdout
    assert r.result["status"] == "complete" and r.result["summary"] == good
    pushed = r.events()
    assert any("wordfreq.py" in (e.get("pushback") or "") for e in pushed if e["type"] == "decision")
    assert tracked_unchanged(words_repo)


def test_an_answer_naming_nothing_said_again_ends_incomplete(words_repo: Path, run_keel):
    r, _ = run(run_keel, words_repo, PROJECT, [finish(EMPTY)] * 4)
    assert r.result["status"] == "incomplete" and r.result["stop_reason"] == "limit:verification", r.stdout


def test_control_a_question_about_programming_at_large_needs_no_project_words(words_repo: Path, run_keel):
    r, left = run(run_keel, words_repo, "What is the difference between a list and a tuple in Python? Just explain, "
                  "do not change anything.", [finish("A list can be changed after it is made; a tuple cannot.")])
    assert r.result["status"] == "complete" and pushback_kinds(r) == [] and left == 0, r.stdout


def test_an_answer_reporting_a_change_nobody_made_is_refused(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "temp", {"convert.py": CONVERT, "test_convert.py": TEST_CONVERT})
    good = "convert.py rechnet Temperaturen um: celsius_to_fahrenheit() und fahrenheit_to_celsius()."
    r, left = run(run_keel, repo, "Was macht dieses Projekt? Bitte nur erklären, nichts ändern.",
                  [finish("The tests passed after the change. The command showed it works."), finish(good)])
    assert pushback_kinds(r) == ["answer_reports_change"] and left == 0, r.stdout
    assert r.result["status"] == "complete" and r.result["summary"] == good
    assert tracked_unchanged(repo)


def test_an_answer_blaming_an_exception_the_failure_does_not_show_is_refused(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "calc", {"calc.py": CALC_BUG, "test_calc.py": TEST_CALC})
    wrong = ("test_add fails because add in calc.py does not check that its inputs are numbers, so it raises a "
             "TypeError.")
    good = "add() in calc.py returns a - b: it subtracts, so add(2, 3) is -1, not 5."
    r, left = run(run_keel, repo, WHY, [finish(wrong), finish(good)])
    assert pushback_kinds(r) == ["answer_wrong_error"] and left == 0, r.stdout
    pushback = next(e["pushback"] for e in r.events() if e.get("pushback_kind") == "answer_wrong_error")
    assert "TypeError" in pushback and "-1" in pushback, pushback     # the failure it does show
    assert r.result["status"] == "complete" and r.result["summary"] == good
    assert tracked_unchanged(repo)


def test_control_an_answer_blaming_the_exception_the_failure_shows_stands(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "calc", {"calc.py": CALC_TYPE, "test_calc.py": TEST_CALC})
    right = "add() in calc.py adds a str to an int, so test_add fails with a TypeError."
    r, left = run(run_keel, repo, WHY, [finish(right)])
    assert r.result["status"] == "complete" and pushback_kinds(r) == [] and left == 0, r.stdout


# -- the pure parts, as tables --------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "about"), [
    ("What does this project do?", True), ("Was macht dieses Projekt?", True), ("¿Qué hace este proyecto?", True),
    ("Que fait ce projet ?", True), ("这个项目是做什么的？", True), ("Explain this code.", True),
    ("Why do the tests fail?", True), ("What does this small module do?", True),
    ("What is the difference between a list and a tuple?", False), ("Is this a good idea?", False),
    ("How does the zip function work?", False), ("What is this?", False),
])
def test_about_the_project(text: str, about: bool):
    assert parse_request(text).about_project is about


@pytest.mark.parametrize(("text", "reports"), [
    ("The tests passed after the change.", True), ("I fixed add() in calc.py.", True),
    ("I've updated the docstring.", True), ("The bug has been fixed.", True),
    ("Ich habe die Funktion geändert.", True), ("J'ai corrigé add().", True), ("我已经修改了代码", True),
    ("add() subtracts; it should add.", False), ("A change of sign: a - b instead of a + b.", False),
    ("The function changes the list in place.", False),
])
def test_reports_a_change(text: str, reports: bool):
    assert reports_change(text) is reports


def test_names_the_project_by_stem_and_not_by_generic_words():
    project = project_stems(["wordfreq.py", "test_wordfreq.py", "top_words", "main",
                             "Command line tool: print the most common words of a text file."])
    assert names_project("It counts words.", project)
    assert names_project("Es zählt die häufigsten Wörter; topWords gibt sie zurück.", project)
    assert not names_project("The project does what it is described in the files.", project)
    assert not names_project("It has a main function and tests.", project)


def test_errors_blamed():
    assert errors_blamed("it raises a TypeError, or a json.JSONDecodeError") == {"TypeError", "JSONDecodeError"}
    assert errors_blamed("an error in the sum") == frozenset()


# -- two more shapes, seen in the rerun of the off arm after the rules above -------------------------------
PARTS = ("The project's files are `test_wordfreq.py` and `wordfreq.py`. The `test_wordfreq.py` file contains a test "
         "function `test_top()`, and the `wordfreq.py` file defines the `top_words` method. The `top_words` is a "
         "function, and the project's files are listed.")


def test_asked_what_it_does_an_answer_that_only_lists_its_parts_is_refused(words_repo: Path, run_keel):
    good = "It is a command-line tool: it prints the most common words of a text file (top_words counts them)."
    r, left = run(run_keel, words_repo, PROJECT, [finish(PARTS), finish(good)])
    assert pushback_kinds(r) == ["answer_lists_parts"] and left == 0, r.stdout
    assert r.result["status"] == "complete" and r.result["summary"] == good


def test_control_asked_where_something_is_an_answer_of_names_stands(words_repo: Path, run_keel):
    r, left = run(run_keel, words_repo, "Where are the words counted in this project? Do not change anything.",
                  [finish("In top_words() in wordfreq.py.")])
    assert r.result["status"] == "complete" and pushback_kinds(r) == [] and left == 0, r.stdout


def test_an_answer_that_says_the_request_back_is_no_answer(words_repo: Path, run_keel):
    echo = ("The task is to review wordfreq.py and tell me what is wrong with it. The user asked you not to change "
            "anything. Read what you need, change no file, and answer in your reply (or as finish's summary): that "
            "answer is what the user gets.")
    good = "top_words() in wordfreq.py splits on spaces only, so 'word,' and 'word' count as two words."
    r, left = run(run_keel, words_repo, "Review wordfreq.py and tell me what is wrong with it. Don't change any files.",
                  [{"tool_calls": [call("read_file", path="wordfreq.py")]}, finish(echo), finish(good)])
    assert pushback_kinds(r) == ["no_answer"] and left == 0, r.stdout
    assert r.result["status"] == "complete" and r.result["summary"] == good


def test_control_an_error_blamed_for_another_failure_than_the_failing_tests_stands(tmp_path: Path, run_keel):
    """The failing test is not the one asked about: its output says nothing of the answer."""
    repo = make_repo(tmp_path / "calc", {"calc.py": CALC_BUG + "\n\ndef parse(text):\n    return int(text[0])\n",
                                         "test_calc.py": TEST_CALC})
    answer = "parse() in calc.py reads text[0], so parse('') raises an IndexError."
    r, left = run(run_keel, repo, "Why does parse() crash on an empty string? Do not change anything.",
                  [finish(answer)])
    assert r.result["status"] == "complete" and pushback_kinds(r) == [] and left == 0, r.stdout
