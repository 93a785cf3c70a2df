"""put_back (keel.drive.putback): when change_file leaves the checks failing and the run has changed two
or more code files, a file the checks do better without goes back as the run found it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import run_small

from keel.drive.putback import better_without, worth_trying

CASE = Path(__file__).resolve().parent.parent / "evals" / "js-due-date"
INVOICE = (CASE / "repo" / "src" / "invoice.js").read_text()
GUESS = INVOICE.replace("now: 0", "now: 4")   # the 1.5B's first change, at ce260cd


def call(name: str, **args: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def js(text: str) -> dict[str, Any]:
    return {"content": f"```javascript\n{text}```\n"}


def run(ws: Path, **assists: bool) -> tuple[Any, list[dict[str, Any]]]:
    """The js-due-date run as the 1.5B made it: the guess at invoice.js (the note's rewrite and the task's,
    both with `now: 4`), then callee_change's fix of parseDate in dates.js."""
    fixed = (CASE / "solution" / "src" / "dates.js").read_text()
    script = [call("change_file", path="src/invoice.js", change="Set now to 4 in TERMS_DAYS."),
              js(GUESS), js(GUESS), js(fixed), js(fixed), call("finish", summary="Fixed the due date.")]
    result, events, _ = run_small(ws, (CASE / "task.md").read_text(), script, **assists)
    return result, events


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    shutil.copytree(CASE / "repo", tmp_path / "ws")
    return tmp_path / "ws"


def test_a_guess_that_only_the_fix_elsewhere_shows_wrong_goes_back(ws: Path) -> None:
    result, events = run(ws)
    assert (ws / "src" / "invoice.js").read_text() == INVOICE          # the guess is gone, byte for byte
    assert "month - 1" in (ws / "src" / "dates.js").read_text()        # the fix stays
    reply = next(m["content"] for m in result.messages if m.get("role") == "tool")
    assert reply.startswith("Overwrote src/invoice.js")
    assert ("keel put src/invoice.js back as the run found it: the checks do better without the change to it "
            "(1 failing with the change, none without it).") in reply
    assert "`npm test` pass. If the task is done, call finish." in reply
    acted = [e["detail"] for e in events if e["type"] == "assist" and e["name"] == "put_back"]
    assert acted == ["src/invoice.js: 1 failing with the change, none without it"]
    assert result.status == "complete"


def test_switched_off_the_guess_stays_and_the_claim_is_refused(ws: Path) -> None:
    result, events = run(ws, put_back=False)
    assert (ws / "src" / "invoice.js").read_text() == GUESS
    assert not [e for e in events if e["type"] == "assist" and e["name"] == "put_back"]
    assert result.status != "complete"


@pytest.mark.parametrize(("modified", "protected", "tried"), [
    (["src/invoice.js", "src/dates.js"], set(), ["src/invoice.js", "src/dates.js"]),
    (["src/invoice.js"], set(), []),                                     # one file back is the start again
    (["src/invoice.js", "test/invoice.test.js"], set(), []),             # a test is evidence, never put back
    (["a.py", "b.py", "check_tests.py"], {"check_tests.py"}, ["a.py", "b.py"]),   # nor a file the checks hold
    (["a.py", "README.md"], set(), []),                                  # code only
])
def test_which_files_may_go_back(modified: list[str], protected: set[str], tried: list[str]) -> None:
    assert worth_trying(modified, protected) == tried


@pytest.mark.parametrize(("now", "without", "better"), [
    ((1, {"due now"}), (0, set()), True),
    ((3, {"a", "b", "c"}), (2, {"a", "b"}), True),
    ((2, {"a", "b"}), (2, {"a", "b"}), False),                           # a tie keeps the change
    ((2, {"a", "b"}), (1, {"c"}), False),                                # fewer, but one that passes now fails
    ((1, {"a"}), (3, {"a", "b", "c"}), False),
])
def test_better_without(now: tuple[int, set[str]], without: tuple[int, set[str]], better: bool) -> None:
    assert better_without((now[0], frozenset(now[1])), (without[0], frozenset(without[1]))) is better
