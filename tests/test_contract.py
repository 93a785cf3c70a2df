"""When the task makes a comment or docstring part of "done", the model checks its code against it
once before the claim stands (keel.verify.contract; the decider's contract_review pushback).

Measured on Qwen2.5-Coder-1.5B (js-implement-function): `npm test` passed and keel said complete,
while the comment's "`size` must be a positive integer (RangeError otherwise)" was not done."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import add_user_config, call, make_repo

from keel.core.request import parse_request
from keel.testing.server import ScriptedEngineServer
from keel.verify.contract import (
    HALF_UP_SAID,
    MAX_DOC_CHARS,
    Promise,
    doc_comments,
    promises,
    review_text,
    rules,
    spelled_out,
)

COLLECTIONS = '''"use strict";

/**
 * Split `items` into arrays of `size` elements.
 * `size` must be a positive integer (RangeError otherwise).
 */
function chunk(items, size) {
  throw new Error("not implemented");
}

/** The items without duplicates. */
const unique = (items) => [...new Set(items)];

class Bag {
  /**
   * Add one item; a null item is refused with a TypeError.
   */
  add(item) {
    this.items.push(item);
  }
}

/** Not above a declaration: a note on the exports. */
module.exports = { chunk, unique, Bag };
'''


@pytest.mark.parametrize(("task", "points"), [
    ("Implement them as their comments describe; the tests are in collections.test.js", True),
    ("Fix it so an empty hour gives count 0 and None for the rest, as the docstring says.", True),
    ("Please implement parse_duration() in durations.py — the docstring says what it should do.", True),
    ("Make chunk() behave as documented in its JSDoc.", True),
    ("The add() function in calc.py returns the wrong result.", False),
    ("Remove the stale comments in app.py.", False),           # comments, but not as the spec
    ("The README says the port is 8080; make the server use it.", False),   # says, but no comment
])
def test_which_tasks_make_a_comment_the_spec(task: str, points: bool):
    assert parse_request(task).points_at_docs is points


def test_the_functions_a_task_names():
    assert parse_request("chunk() and groupBy(), then chunk() again; stats.summarize() too").functions == \
        ("chunk", "groupBy", "summarize")
    assert parse_request("no calls here, nor a bare name or f(x)").functions == ()


def test_js_doc_blocks_belong_to_the_declaration_right_below():
    docs = doc_comments("collections.js", COLLECTIONS)
    assert docs == {"chunk": "Split `items` into arrays of `size` elements. `size` must be a positive integer "
                             "(RangeError otherwise).",
                    "unique": "The items without duplicates.",
                    "add": "Add one item; a null item is refused with a TypeError."}


def test_python_docstrings_and_files_that_do_not_parse():
    text = 'def f(n):\n    """Twice n.\n\n    Raises ValueError for a negative n.\n    """\n    return 2 * n\n\n' \
           'def g():\n    return 1\n'
    assert doc_comments("m.py", text) == {"f": "Twice n. Raises ValueError for a negative n."}
    assert doc_comments("m.py", "def f(:\n") == {} and doc_comments("notes.txt", text) == {}


def test_the_review_lists_the_named_functions_comments_in_the_changed_files():
    task = "collections.js has two stubs, chunk() and groupBy(). Implement them as their comments describe."
    text = review_text(promises(parse_request(task), {"collections.js": COLLECTIONS}), change_tool=False)
    assert text == ("- chunk in collections.js: Split `items` into arrays of `size` elements. `size` must be a "
                    "positive integer (RangeError otherwise).\n  Spelled out: `size` must be a positive integer "
                    "(RangeError otherwise). Each of 0, -1 and 1.5 gives RangeError.")   # groupBy: no comment; unique: not named
    assert review_text(promises(parse_request("Implement chunk() so the tests pass."),
                                {"collections.js": COLLECTIONS}),
                       change_tool=False) == ""
    long = '"""' + "word " * 400 + '"""'
    shown = review_text(promises(parse_request("f() as its docstring says"), {"m.py": f"def f():\n    {long}\n"}),
                        change_tool=False)
    assert len(shown) <= MAX_DOC_CHARS + len("- f in m.py: ") and shown.endswith("…")


@pytest.mark.parametrize("rule, expected", [
    ("`size` must be a positive integer (RangeError otherwise).",
     "`size` must be a positive integer (RangeError otherwise). Each of 0, -1 and 1.5 gives RangeError."),
    ("n must be an integer", "n must be an integer. 1.5 is refused."),
    ("Raises ValueError when n is not positive.", "Raises ValueError when n is not positive. Each of 0 and -1 gives "
     "ValueError."),
    ("count must be a non-negative integer.", "count must be a non-negative integer. Each of -1 and 1.5 is refused."),
    ("The list must be non-empty (ValueError otherwise).",
     "The list must be non-empty (ValueError otherwise). An empty one gives ValueError."),
    ("The input array is not modified.", "The input array is not modified."),
    ("``percent`` % of ``cents``, rounded to the nearest cent (half a cent rounds up).",
     "``percent`` % of ``cents``, rounded to the nearest cent (half a cent rounds up). " + HALF_UP_SAID),
    ("Rounds half up to a whole number", "Rounds half up to a whole number. " + HALF_UP_SAID),
    ("Rounds down to the cent.", "Rounds down to the cent."),
])
def test_a_rule_with_an_edge_is_spelled_out_as_the_values_it_refuses(rule: str, expected: str) -> None:
    assert spelled_out(rule) == expected


def test_the_rules_of_a_comment_and_the_next_call_that_carries_them():
    doc = ("Split `items` into arrays of `size` elements; the last one may be shorter. chunk([1, 2, 3], 2) -> "
           "[[1, 2], [3]]. `size` must be a positive integer (RangeError otherwise). The input array is not modified.")
    assert rules(doc) == ("`size` must be a positive integer (RangeError otherwise). Each of 0, -1 and 1.5 gives "
                          "RangeError.", "The input array is not modified.")
    found = promises(parse_request("Implement chunk() as its comment describes."),
                     {"c.js": f"/** {doc} */\nfunction chunk(items, size) {{}}\n"})
    assert found == (Promise("chunk", "c.js", doc, rules(doc)),)
    text = review_text(found, change_tool=True)
    assert text.splitlines()[0] == f"- chunk in c.js: {doc}"
    assert text.splitlines()[-1] == ('If your code does not do all of that, a good next call: change_file with {"path": '
                                     '"c.js", "change": "chunk: `size` must be a positive integer (RangeError '
                                     'otherwise). Each of 0, -1 and 1.5 gives RangeError. The input array is not '
                                     'modified."}')
    assert "good next call" not in review_text(found, change_tool=False)   # edit_file: no note to suggest
    no_rules = (Promise("f", "m.py", "Twice n.", ()),)
    assert review_text(no_rules, change_tool=True) == "- f in m.py: Twice n."


# ---- in a run: the real CLI over the scripted server ----------------------------------------------

DOUBLE = 'def double(n):\n    """Twice n. A negative n raises ValueError."""\n    raise NotImplementedError\n'
TEST_DOUBLE = "from mathx import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
STRICT = ('def double(n):\n    """Twice n. A negative n raises ValueError."""\n    if n < 0:\n'
          '        raise ValueError(n)\n    return 2 * n\n')


def _run(run_keel, repo: Path, task: str, script: list[dict], *extra: str) -> tuple[object, list[dict]]:
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", task, "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json", *extra, timeout=120)
        return r, server.requests


def test_a_claim_is_checked_once_against_the_docstring_the_task_points_at(tmp_path: Path, run_keel, keel_env):
    add_user_config(keel_env, "[assists]\ncontract_review = true")   # the full profile's default is off
    repo = make_repo(tmp_path / "repo", {"mathx.py": DOUBLE, "test_mathx.py": TEST_DOUBLE})
    script = [{"tool_calls": [call("edit_file", path="mathx.py", old_text="    raise NotImplementedError", new_text="    return 2 * n")]},
              {"tool_calls": [call("finish", summary="double() doubles; the test passes")]},
              {"tool_calls": [call("edit_file", path="mathx.py", old_text="    return 2 * n",
                                              new_text="    if n < 0:\n        raise ValueError(n)\n    return 2 * n")]},
              {"tool_calls": [call("finish", summary="double() doubles and refuses a negative n")]}]
    r, requests = _run(run_keel, repo, "Implement double() in mathx.py as its docstring says.", script)
    assert r.code == 0, r.stdout + r.stderr
    review = requests[2]["messages"][-1]
    assert review["role"] == "user" and "- double in mathx.py: Twice n. A negative n raises ValueError." in \
        review["content"] and "The checks pass." in review["content"]
    assert r.result["stop_reason"] == "complete" and (repo / "mathx.py").read_text() == STRICT
    kinds = [e.get("pushback_kind") for e in r.events() if e["type"] == "decision"]
    assert kinds.count("contract_review") == 1
    assert [e["name"] for e in r.events() if e["type"] == "assist"] == ["contract_review"]


@pytest.mark.parametrize("after_review", ["reads", "keeps it passing", "breaks it"])
def test_a_reviewed_claim_stands_when_a_limit_comes_first(tmp_path: Path, run_keel, keel_env, after_review: str):
    """js-implement-function on the 1.5B: the claim passed the tests and the probes at 340 s, the review's
    change came back unchanged, and the run ended on the wall clock with the task done. A claim the gate
    passed stands at a limit while the workspace is as it was then, or passes the gate again then."""
    add_user_config(keel_env, "[assists]\ncontract_review = true")
    repo = make_repo(tmp_path / "repo", {"mathx.py": DOUBLE, "test_mathx.py": TEST_DOUBLE})
    later = call("read_file", path="mathx.py") if after_review == "reads" else \
        call("edit_file", path="mathx.py", old_text="    return 2 * n",
             new_text="    return n + n" if after_review == "keeps it passing" else "    return n + 1")
    script = [{"tool_calls": [call("edit_file", path="mathx.py", old_text="    raise NotImplementedError",
                                   new_text="    return 2 * n")]},
              {"tool_calls": [call("finish", summary="double() doubles; the test passes")]},
              {"tool_calls": [later]}]
    r, requests = _run(run_keel, repo, "Implement double() in mathx.py as its docstring says.", script,
                       "--max-steps", "3")
    assert len(requests) == 3 and "The checks pass." in requests[2]["messages"][-1]["content"]   # the review
    if after_review != "breaks it":   # unchanged since the claim, or changed and passing the gate again at the limit
        assert r.code == 0, r.stdout + r.stderr
        assert r.result["status"] == "complete" and r.result["stop_reason"] == "complete"
        assert r.result["summary"] == "double() doubles; the test passes"
    else:
        assert r.result["status"] == "incomplete" and r.result["stop_reason"] == "limit:steps"


def test_a_stop_hook_that_says_not_yet_keeps_the_limit(tmp_path: Path, run_keel, keel_env):
    """A claim that would stand at a limit still asks the Stop hooks; "not yet" with no time left is the limit."""
    hook = tmp_path / "stop.py"
    hook.write_text("import sys\nsys.stderr.write('not yet')\nsys.exit(2)\n")
    add_user_config(keel_env, f'[assists]\ncontract_review = true\n[[hooks.Stop]]\ncommand = "{sys.executable} {hook}"')
    repo = make_repo(tmp_path / "repo", {"mathx.py": DOUBLE, "test_mathx.py": TEST_DOUBLE})
    script = [{"tool_calls": [call("edit_file", path="mathx.py", old_text="    raise NotImplementedError",
                                   new_text="    return 2 * n")]},
              {"tool_calls": [call("finish", summary="double() doubles; the test passes")]},
              {"tool_calls": [call("read_file", path="mathx.py")]}]
    r, _ = _run(run_keel, repo, "Implement double() in mathx.py as its docstring says.", script, "--max-steps", "3")
    assert r.result["status"] == "incomplete" and r.result["stop_reason"] == "limit:steps"


def test_the_full_profile_has_no_contract_review_unless_switched_on(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "repo", {"mathx.py": DOUBLE, "test_mathx.py": TEST_DOUBLE})
    script = [{"tool_calls": [call("edit_file", path="mathx.py", old_text="    raise NotImplementedError", new_text="    return 2 * n")]},
              {"tool_calls": [call("finish", summary="double() doubles; the test passes")]}]
    r, requests = _run(run_keel, repo, "Implement double() in mathx.py as its docstring says.", script)
    assert r.code == 0, r.stdout + r.stderr
    assert r.result["stop_reason"] == "complete" and len(requests) == 2
    assert not [e for e in r.events() if e["type"] == "assist"]


def test_without_a_pointer_to_the_docs_the_passing_checks_decide(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "repo", {"mathx.py": DOUBLE, "test_mathx.py": TEST_DOUBLE})
    script = [{"tool_calls": [call("edit_file", path="mathx.py", old_text="    raise NotImplementedError", new_text="    return 2 * n")]},
              {"tool_calls": [call("finish", summary="double() doubles")]}]
    r, requests = _run(run_keel, repo, "Implement double() in mathx.py so test_mathx.py passes.", script)
    assert r.code == 0, r.stdout + r.stderr
    assert r.result["stop_reason"] == "complete" and len(requests) == 2


# ---- a comment that says what the task says is part of "done" too (py-discount-cent) --------------------
MONEY = ('def percent_of(cents, percent):\n    """``percent`` % of ``cents``, rounded to the nearest cent (half a cent '
         'rounds up)."""\n    return int(cents * percent / 100)\n\n\ndef cents_of(text):\n    """Parse "12.34"."""\n'
         '    return int(text.replace(".", ""))\n')
TEST_MONEY = "from money import percent_of\n\n\ndef test_staff():\n    assert percent_of(3349, 30) == 1005\n"
TASK_MONEY = "The staff discount is a cent short. Discounts are supposed to be rounded to the nearest cent. Fix it."


def test_a_comment_that_says_what_the_task_says_is_a_promise():
    found = promises(parse_request(TASK_MONEY), {"money.py": MONEY})
    assert [p.name for p in found] == ["percent_of"]   # cents_of's docstring says nothing the task says
    assert found[0].rules[0].endswith(HALF_UP_SAID)
    assert promises(parse_request("The staff discount is a cent short; fix it."), {"money.py": MONEY}) == ()


def test_an_echoed_half_up_rule_refuses_round_and_is_reviewed_once(tmp_path: Path, run_keel, keel_env):
    add_user_config(keel_env, "[assists]\ncontract_review = true")   # the full profile's default is off
    repo = make_repo(tmp_path / "repo", {"money.py": MONEY, "test_money.py": TEST_MONEY})
    banker = "    return round(cents * percent / 100)\n"
    half_up = "    return (cents * percent + 50) // 100\n"
    script = [{"tool_calls": [call("edit_file", path="money.py", old_text="    return int(cents * percent / 100)\n",
                                   new_text=banker)]},
              {"tool_calls": [call("finish", summary="percent_of rounds to the nearest cent")]},
              {"tool_calls": [call("edit_file", path="money.py", old_text=banker, new_text=half_up)]},
              {"tool_calls": [call("finish", summary="half a cent now rounds up")]},
              {"tool_calls": [call("finish", summary="it does what the docstring says")]}]
    r, requests = _run(run_keel, repo, TASK_MONEY, script)
    assert r.code == 0, r.stdout + r.stderr
    refused = requests[2]["messages"][-1]["content"]   # the tests pass; the comment's rule, probed, does not
    assert "FAILED: percent_of calls round(), which rounds half to even" in refused
    review = requests[4]["messages"][-1]["content"]
    assert "- percent_of in money.py:" in review and f"(half a cent rounds up). {HALF_UP_SAID}" in review
    assert r.result["stop_reason"] == "complete" and half_up in (repo / "money.py").read_text()
    kinds = [e.get("pushback_kind") for e in r.events() if e["type"] == "decision"]
    assert kinds.count("contract_review") == 1 and kinds.count("verification_failed") == 1


def test_without_the_probes_an_echoed_rule_is_only_reviewed(tmp_path: Path, run_keel, keel_env):
    add_user_config(keel_env, "[assists]\ncontract_review = true\nspec_probes = false")
    repo = make_repo(tmp_path / "repo", {"money.py": MONEY, "test_money.py": TEST_MONEY})
    script = [{"tool_calls": [call("edit_file", path="money.py", old_text="    return int(cents * percent / 100)\n",
                                   new_text="    return round(cents * percent / 100)\n")]},
              {"tool_calls": [call("finish", summary="percent_of rounds to the nearest cent")]},
              {"tool_calls": [call("finish", summary="it does")]}]
    r, _ = _run(run_keel, repo, TASK_MONEY, script)
    kinds = [e.get("pushback_kind") for e in r.events() if e["type"] == "decision"]
    assert r.result["stop_reason"] == "complete" and kinds.count("contract_review") == 1   # the control
