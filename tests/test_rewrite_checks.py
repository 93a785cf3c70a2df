"""change_file's checks on a rewrite before it lands (keel/drive/rewrite.py, the editor_checks assist) and the
guards that must not stop legitimate work: a stub implemented is a change, and the editor's reply cap grows
with the file it must write. Real HTTP to the scripted engine, real files, real checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keel.agent import Agent
from keel.config import Config
from keel.context.preload import FileText
from keel.drive.change import judge
from keel.drive.rewrite import (
    is_stub,
    keeps_definitions,
    reply_need,
    restore_dropped_js,
    rewrite_problem,
    without_self_test,
)
from keel.drive.unbound import newly_unbound, unbound_names, with_imports
from keel.testing import ScriptedEngineServer

EVALS = Path(__file__).resolve().parent.parent / "evals"
BROKEN = "def cost(cents, threshold=5000):\n    if cents > threshold:\n        return 0\n    return 499\n"
FIXED = BROKEN.replace("cents > threshold", "cents >= threshold")
TESTS = ("from shipping import cost\n\n\ndef test_at_threshold():\n    assert cost(5000) == 0\n\n\n"
         "def test_small():\n    assert cost(100) == 499\n")


def call(name: str, **args: object) -> dict[str, object]:
    return {"name": name, "arguments": args}


def fenced(text: str) -> str:
    return f"```python\n{text}```\n"


# ---- the pure checks ------------------------------------------------------------------------------
def test_a_rewrite_holding_the_tests_text_or_importing_itself_is_refused():
    tests = [FileText("test_shipping.py", TESTS)]
    copied = rewrite_problem("shipping.py", BROKEN, TESTS, "fix it", tests)
    assert copied is not None and "holds the test file test_shipping.py's text" in copied
    itself = rewrite_problem("shipping.py", BROKEN, "from shipping import cost\n" + FIXED, "fix it", tests)
    assert itself is not None and "imports its own module ('from shipping import cost')" in itself
    assert rewrite_problem("shop/shipping.py", BROKEN, "import shop.shipping\n" + FIXED, "", []) is not None
    assert rewrite_problem("shipping.py", BROKEN, FIXED, "fix it", tests) is None
    # a test file may hold tests, and a module may import a module of a similar name
    assert rewrite_problem("test_shipping.py", TESTS, TESTS + "\n\ndef test_more():\n    assert True\n", "", tests) is None
    assert rewrite_problem("shipping.py", BROKEN, "import shipping_rates\n" + FIXED, "", tests) is None


def test_javascript_rewrites_that_drop_a_function_or_do_not_parse_are_refused():
    old = "function a() { return 1; }\nfunction b() { return 2; }\nmodule.exports = { a, b };\n"
    dropped = rewrite_problem("lib/m.js", old, "function a() { return 3; }\nmodule.exports = { a };\n", "a returns 3", [])
    assert dropped is not None and "dropped b()" in dropped
    assert rewrite_problem("lib/m.js", old, "function a() { return 3; }\nmodule.exports = { a };\n", "remove b", []) is None
    broken = rewrite_problem("lib/m.js", old, old.replace("return 2;", "return (2;"), "", [])
    assert broken is not None and "does not parse (line 2" in broken
    itself = rewrite_problem("lib/m.js", old, 'const m = require("./m");\n' + old, "", [])
    assert itself is not None and "imports its own module" in itself


def test_javascript_definitions_a_rewrite_left_out_go_back_with_their_export():
    """Measured (js-rename-function): asked to rename fmtMoney, the editor gave back the renamed function
    alone, sumCents() and its export gone, the same reply each time it was asked again."""
    old = (EVALS / "js-rename-function" / "repo" / "lib" / "money.js").read_text()
    new = old.split("function sumCents")[0].replace("fmtMoney", "formatMoney") + "module.exports = { formatMoney };\n"
    restored, names = restore_dropped_js(old, new, "rename fmtMoney to formatMoney")
    assert names == ["sumCents"]
    assert restored.index("function formatMoney") < restored.index("function sumCents(items)")
    assert restored.rstrip().endswith("module.exports = { formatMoney, sumCents };") and "fmtMoney" not in restored
    assert restore_dropped_js(old, new, "rename fmtMoney and remove sumCents") == (new, [])
    assert rewrite_problem("lib/money.js", old, restored, "rename fmtMoney", []) is None


@pytest.mark.parametrize("case", ["py-stub-ledger", "py-spec-instructions", "js-spec-brackets"])
def test_implementing_a_stub_is_a_change_not_a_replacement(case: str):
    """Measured: the rewrite of a file of placeholders was refused as keeping 19% of its lines."""
    folder = EVALS / case
    path = next(p.relative_to(folder / "solution").as_posix() for p in (folder / "solution").rglob("*")
                if p.is_file())
    stub, done = (folder / "repo" / path).read_text(), (folder / "solution" / path).read_text()
    assert is_stub(path, stub) and not is_stub(path, done)
    assert keeps_definitions(path, stub, done)
    assert judge(stub, done, path, cut=False).text == done


def test_a_gutted_file_is_still_a_replacement():
    old = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(8))
    assert judge(old, "def f0(x):\n    return x\n", "m.txt", cut=False).text is None   # no parser: lines decide
    assert not keeps_definitions("m.py", old, "def f0(x):\n    return x\n")


STUB_CLASS = "class Number:\n" + "".join(f"    def {m}(self, other):\n        pass\n\n" for m in
                                         ("__init__", "__add__", "__sub__", "__mul__", "__abs__", "conjugate"))


def test_a_stub_implemented_without_one_of_its_placeholders_is_still_a_change():
    """Exercism complex-numbers: every candidate implemented the stub with ``abs`` for ``__abs__``, and
    each was refused as replacing the file (42% of its lines kept), so none was tried."""
    done = ("class Number:\n    def __init__(self, real, imaginary):\n        self.real = real\n\n"
            + "".join(f"    def {m}(self, other):\n        return Number(self.real {op} other.real, 0)\n\n"
                      for m, op in (("__add__", "+"), ("__sub__", "-"), ("__mul__", "*")))
            + "    def abs(self):\n        return abs(self.real)\n\n    def conjugate(self):\n        return self\n")
    assert keeps_definitions("number.py", STUB_CLASS, done)
    assert judge(STUB_CLASS, done, "number.py", cut=False).text == done
    # what was written is not a placeholder: dropping __abs__ once it has a body is a replacement again
    written = STUB_CLASS.replace("def __abs__(self, other):\n        pass", "def __abs__(self, other):\n        return 1")
    assert not keeps_definitions("number.py", written, done)
    assert judge(written, done, "number.py", cut=False).text is None


def test_the_reply_a_stub_needs_is_longer_than_the_stub():
    stub = (EVALS / "py-stub-ledger" / "repo" / "ledger.py").read_text()
    done = (EVALS / "py-stub-ledger" / "solution" / "ledger.py").read_text()
    assert reply_need("ledger.py", stub) > len(done) / 3.5 > 768       # the small profile's usual cap
    assert reply_need("shipping.py", BROKEN) < 2 * len(BROKEN) / 3.5 + 40


UNBOUND = [
    # (source, what it reads unbound): None where keel cannot tell
    ("def render(text, today=TODAY):\n    return text\n", {"TODAY"}),                  # py-todo-due, measured
    ("import datetime\ndef render(text, today=None):\n    return today or datetime.date.today()\n", set()),
    ("def f():\n    return helper()\ndef helper():\n    return 1\n", set()),            # defined later: fine
    ("class C:\n    a = 1\n    def m(self):\n        return a\n", {"a"}),             # class names are not global
    ("def f():\n    global G\n    G = 1\nprint(G, __file__, len([]))\n", set()),
    ("xs = [y for y in range(3) if y > limit]\n", {"limit"}),
    ("try:\n    import ujson as json\nexcept ImportError:\n    json = None\n", set()),
    ("from os.path import *\nprint(join)\n", None),                                   # a star import binds anything
    ("globals()['X'] = 1\nprint(X)\n", None),
    ("def f(:\n", None),                                                               # does not compile
    ("from __future__ import annotations\ndef f(x: Foo) -> Bar:\n    return x\n", set()),  # never evaluated
    ("def f(x: Foo):\n    return x\n", {"Foo"}),                                        # evaluated at def
    ("from __future__ import annotations\ndef f(x: Foo):\n    return Foo(x)\n", {"Foo"}),  # also used as a value
]


@pytest.mark.parametrize(("source", "unbound"), UNBOUND)
def test_the_names_a_module_reads_but_never_binds(source: str, unbound: set[str] | None):
    assert unbound_names(source) == unbound


def test_a_rewrite_that_reads_a_name_nothing_binds_is_refused_unless_the_file_already_did():
    """Measured (py-todo-due): ``today=TODAY`` copied from the test file made render.py fail at import."""
    old = "def render(text):\n    return text\n"
    problem = rewrite_problem("render.py", old, "def render(text, today=TODAY):\n    return text\n", "add today", [])
    assert problem is not None and "uses TODAY, which render.py never defines or imports" in problem
    assert "NameError" in problem
    legacy = "def render(text):\n    return text + SUFFIX\n"   # already unbound before: not the rewrite's doing
    assert rewrite_problem("render.py", legacy, legacy.replace("text +", "text.strip() +"), "", []) is None
    assert newly_unbound(None, "print(missing)\n") == ["missing"]
    assert rewrite_problem("notes.py", None, "TODO\n", "", []) is None   # a new file may be a fragment
    assert rewrite_problem("render.js", "", "render(TODAY);\n", "", []) is None   # Python only


@pytest.mark.parametrize(("source", "added", "head"), [
    # (a rewrite, the import lines added, how the file begins after)
    ("def due():\n    return datetime.date(2024, 5, 1)\n", ["import datetime"], "import datetime\ndef due"),
    ('"""Doc."""\nfrom __future__ import annotations\n\nx = defaultdict(list)\n',
     ["from collections import defaultdict"], '"""Doc."""\nfrom __future__ import annotations\nfrom collections'),
    ("def f(xs: List[int]) -> int:\n    return len(xs)\n", ["from typing import List"], "from typing import List\n"),
    ("print(TODAY)\n", [], "print(TODAY)"),                  # not a module, not a name keel knows: stays
    ("def f(:\n", [], "def f(:"),
])
def test_a_rewrite_gets_the_imports_it_forgot_when_keel_knows_where_they_come_from(source, added, head):
    new, lines = with_imports(source, sorted(unbound_names(source) or ()))
    assert lines == added and new.startswith(head)
    if added:
        assert unbound_names(new) == set()


SELF_TESTED = FIXED + ("\n# Test the function\nif __name__ == \"__main__\":\n    import unittest\n\n"
                       "    class CostTest(unittest.TestCase):\n        def test_at_threshold(self):\n"
                       "            self.assertEqual(cost(5000), 0)\n\n    unittest.main()\n")
DEMO = FIXED + "\nif __name__ == '__main__':\n    print(cost(100))\n"


@pytest.mark.parametrize(("path", "current", "new", "expected"), [
    ("shipping.py", BROKEN, SELF_TESTED, FIXED),                      # the tests it appended go, with their comment
    ("shipping.py", BROKEN, FIXED + "\nif __name__ == '__main__':\n    assert cost(5000) == 0\n", FIXED),
    ("shipping.py", BROKEN, DEMO, DEMO),                              # a main block without tests stays
    ("shipping.py", DEMO, SELF_TESTED, SELF_TESTED),                  # the file had a main block: its own business
    ("test_shipping.py", TESTS, TESTS + SELF_TESTED, TESTS + SELF_TESTED),   # a test file may hold tests
    ("shipping.py", BROKEN, SELF_TESTED + "def broken(:\n", SELF_TESTED + "def broken(:\n"),   # not parsed: left alone
])
def test_the_tests_a_rewrite_appended_under_main_are_left_out(path: str, current: str, new: str, expected: str):
    kept, dropped = without_self_test(path, current, new)
    assert kept == expected and dropped == (kept != new)


# ---- through a run: real HTTP to the scripted engine ---------------------------------------------
@pytest.fixture
def shop(tmp_path: Path) -> Path:
    ws = tmp_path / "shop"
    ws.mkdir()
    (ws / "shipping.py").write_text(BROKEN)
    (ws / "test_shipping.py").write_text(TESTS)
    return ws


def run_small(ws: Path, script: list[dict[str, object]], task: str, **assists: bool) -> tuple[object, list[dict]]:
    with ScriptedEngineServer([*script, {"tool_calls": [call("finish", summary="done")]}]) as server:
        cfg = Config()
        cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", "small"
        cfg.engine.max_tokens = 768   # the in-process engine's cap
        for name, on in assists.items():
            setattr(cfg.assists, name, on)
        log = ws.parent / "session.jsonl"
        result = Agent(workspace=ws, config=cfg, log_path=log).run(task)
        return result, server.requests


def events(ws: Path) -> list[dict]:
    return [json.loads(line) for line in (ws.parent / "session.jsonl").read_text().splitlines()]


def test_a_rewrite_with_the_tests_text_is_not_written_and_the_editor_is_asked_again_with_why(shop: Path):
    result, requests = run_small(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="make the test pass")]},
        {"content": fenced(TESTS)},      # the editor copies the test file
        {"content": fenced(FIXED)}],     # asked again, told why
        "A cart of exactly $50 is charged shipping; fix it.")
    again = requests[2]["messages"][1]["content"]
    assert "Your last rewrite was not used: The rewrite of shipping.py holds the test file test_shipping.py's text" \
        in again
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"   # type: ignore[attr-defined]
    acted = [e["name"] for e in events(shop) if e["type"] == "assist"]
    assert "editor_checks" in acted and "whole_file_editor" in acted


def test_without_the_check_the_copy_lands(shop: Path):
    """The control: the same editor reply is written when editor_checks is off."""
    run_small(shop, [{"tool_calls": [call("change_file", path="shipping.py", change="make the test pass")]},
                     {"content": fenced(TESTS)}, {"content": fenced(TESTS)}],
              "A cart of exactly $50 is charged shipping; fix it.", editor_checks=False)
    assert "def test_at_threshold" in (shop / "shipping.py").read_text()


def test_a_rewrite_with_its_own_tests_under_main_is_written_without_them(shop: Path):
    """Exercism dnd-character: the module came back with a copy of the tests under ``__main__``, and
    was refused whole as holding the test file's text."""
    result, requests = run_small(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="a cart of exactly the threshold ships free")]},
        {"content": fenced(SELF_TESTED)}],
        "A cart of exactly $50 is charged shipping; fix it.")
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"   # type: ignore[attr-defined]
    assert len(requests) == 3   # the agent's call, one editor reply, the finish: nothing asked again
    acted = [e["detail"] for e in events(shop) if e["type"] == "assist" and e["name"] == "editor_checks"]
    assert acted == ["shipping.py: the rewrite's own tests under __main__ left out"]


def test_a_rewrite_reading_a_name_it_never_binds_is_not_written_and_the_editor_hears_which(shop: Path):
    """py-todo-due's shape: the editor copies the test's constant into a default argument."""
    unbound = FIXED.replace("threshold=5000", "threshold=THRESHOLD")
    result, requests = run_small(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="a cart of exactly the threshold ships free")]},
        {"content": fenced(unbound)},
        {"content": fenced(FIXED)}],
        "A cart of exactly $50 is charged shipping; fix it.")
    again = requests[2]["messages"][1]["content"]
    assert "uses THRESHOLD, which shipping.py never defines or imports" in again
    assert (shop / "shipping.py").read_text() == FIXED and result.status == "complete"   # type: ignore[attr-defined]


def test_a_rewrite_that_forgot_an_import_of_the_standard_library_is_written_with_it(shop: Path):
    """py-todo-due: parse.py's rewrites used datetime without importing it, and were refused four times."""
    dated = "def cost(cents, threshold=5000):\n    math.floor(1.5)\n" + FIXED.split(":\n", 1)[1]
    result, requests = run_small(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="a cart of exactly the threshold ships free")]},
        {"content": fenced(dated)}],
        "A cart of exactly $50 is charged shipping; fix it.")
    assert (shop / "shipping.py").read_text() == "import math\n" + dated
    assert result.status == "complete"   # type: ignore[attr-defined]
    acted = [e["detail"] for e in events(shop) if e["type"] == "assist" and e["name"] == "editor_checks"]
    assert acted == ["shipping.py: the rewrite's missing import math added"]


def test_the_editor_may_write_a_stub_longer_than_one_usual_reply(tmp_path: Path):
    ws = tmp_path / "ledger"
    ws.mkdir()
    for name in ("ledger.py", "test_ledger.py"):
        (ws / name).write_text((EVALS / "py-stub-ledger" / "repo" / name).read_text())
    done = (EVALS / "py-stub-ledger" / "solution" / "ledger.py").read_text()
    result, requests = run_small(ws, [{"tool_calls": [call("change_file", path="ledger.py",
                                                           change="implement every method")]},
                                      {"content": fenced(done)}],
                                 "ledger.py is a skeleton; implement Ledger as its docstrings say.")
    assert requests[1]["max_tokens"] >= reply_need("ledger.py", (EVALS / "py-stub-ledger" / "repo" / "ledger.py").read_text())
    assert "max_tokens" not in requests[0] or requests[0]["max_tokens"] == 768   # the conversation keeps its cap
    assert (ws / "ledger.py").read_text() == done and result.status == "complete"   # type: ignore[attr-defined]


def test_a_file_the_run_grew_is_rewritten_while_the_editor_cap_allows_it(shop: Path):
    """Measured: src/emitter.js grew to 54 lines with the first rewrite, and was then "too long to be
    rewritten whole in one reply" for the 768-token cap."""
    grown = FIXED + "".join(f"\n\ndef helper_{i}(x):\n    \"\"\"Helper {i}.\"\"\"\n    return x * {i} + {i}\n"
                            for i in range(45))
    (shop / "shipping.py").write_text(grown.replace(">=", ">"))
    assert len(grown) / 3.5 * 1.25 + 40 > 768
    _, requests = run_small(shop, [{"tool_calls": [call("change_file", path="shipping.py", change="use >=")]},
                                   {"content": fenced(grown)}],
                            "A cart of exactly $50 is charged shipping; fix it.")
    assert (shop / "shipping.py").read_text() == grown and requests[1]["max_tokens"] > 768


# ---- the cause one call away (keel/drive/callee.py) --------------------------------------------------
def discount_shop(tmp_path: Path) -> Path:
    ws = tmp_path / "shop"
    ws.mkdir()
    for name in ("money.py", "checkout.py", "test_checkout.py"):
        (ws / name).write_text((EVALS / "py-discount-cent" / "repo" / name).read_text())
    return ws


def test_when_the_callers_rewrite_does_not_help_the_change_is_asked_in_the_module_it_calls(tmp_path: Path):
    ws = discount_shop(tmp_path)
    checkout = (ws / "checkout.py").read_text()
    fixed = (EVALS / "py-discount-cent" / "solution" / "money.py").read_text()
    result, requests = run_small(ws, [
        {"tool_calls": [call("change_file", path="checkout.py", change="round the discount to the nearest cent")]},
        {"content": fenced(checkout)}, {"content": fenced(checkout)},    # the caller is right: unchanged twice
        {"content": fenced(fixed)},                                      # asked in money.py, which it calls
        {"tool_calls": [call("finish", summary="fixed")]}],              # then the docstring's review
        (EVALS / "py-discount-cent" / "task.md").read_text())
    asked = requests[3]["messages"][1]["content"]
    assert "=== money.py ===" in asked and "checkout.py calls format_cents(), percent_of() from money.py" in asked
    assert (ws / "money.py").read_text() == fixed and (ws / "checkout.py").read_text() == checkout
    reply = next(m["content"] for m in result.messages if m.get("role") == "tool")   # type: ignore[attr-defined]
    assert reply.startswith("Your change to checkout.py is not needed: The cause was one call away: keel made the "
                            "change in money.py, which checkout.py calls.")
    assert "came back unchanged" not in reply and reply.rstrip().endswith("If the task is done, call finish.")
    assert result.status == "complete"   # type: ignore[attr-defined]
    assert "callee_change" in [e["name"] for e in events(ws) if e["type"] == "assist"]


def test_a_change_aimed_at_the_test_goes_on_from_the_module_it_tests_to_the_one_that_calls(tmp_path: Path):
    """Measured on the 1.5B (py-discount-cent): the change aimed at test_checkout.py went to checkout.py,
    whose rewrite did not help; the search one call further started again from the test file, so it
    asked checkout.py a second time and never reached money.py."""
    ws = discount_shop(tmp_path)
    checkout = (ws / "checkout.py").read_text()
    fixed = (EVALS / "py-discount-cent" / "solution" / "money.py").read_text()
    result, requests = run_small(ws, [
        {"tool_calls": [call("change_file", path="test_checkout.py", change="round the discount")]},
        {"content": fenced(checkout)}, {"content": fenced(checkout)},    # redirected to checkout.py: unchanged
        {"content": fenced(fixed)},                                      # then money.py, which checkout.py calls
        {"tool_calls": [call("finish", summary="fixed")]}],              # then the docstring's review
        (EVALS / "py-discount-cent" / "task.md").read_text())
    asked = requests[3]["messages"][1]["content"]
    assert "checkout.py calls format_cents(), percent_of() from money.py" in asked
    assert (ws / "money.py").read_text() == fixed and (ws / "checkout.py").read_text() == checkout
    assert result.status == "complete"   # type: ignore[attr-defined]


def test_a_change_in_the_module_it_calls_that_does_not_help_is_undone(tmp_path: Path):
    ws = discount_shop(tmp_path)
    checkout, money = (ws / "checkout.py").read_text(), (ws / "money.py").read_text()
    worse = money.replace("int(cents * percent / 100)", "int(cents * percent / 100) + 1")
    result, _ = run_small(ws, [
        {"tool_calls": [call("change_file", path="checkout.py", change="round the discount")]},
        {"content": fenced(checkout)}, {"content": fenced(checkout)},
        {"content": fenced(worse)}, {"content": fenced(worse)}],
        (EVALS / "py-discount-cent" / "task.md").read_text(), candidates=False)   # no more rewrites judged
    assert (ws / "money.py").read_text() == money
    reply = next(m["content"] for m in result.messages if m.get("role") == "tool")   # type: ignore[attr-defined]
    assert "keel also tried the change in money.py" in reply


def test_without_the_assist_the_module_it_calls_is_left_alone(tmp_path: Path):
    ws = discount_shop(tmp_path)
    checkout, money = (ws / "checkout.py").read_text(), (ws / "money.py").read_text()
    _, requests = run_small(ws, [
        {"tool_calls": [call("change_file", path="checkout.py", change="round the discount")]},
        {"content": fenced(checkout)}, {"content": fenced(checkout)}],
        (EVALS / "py-discount-cent" / "task.md").read_text(), callee_change=False)
    assert (ws / "money.py").read_text() == money
    assert not [q for q in requests if "corrected money.py" in str(q["messages"][-1]["content"])]


# ---- a change aimed at a path that does not exist, when one file of its name does elsewhere -------------
@pytest.mark.parametrize(("shown", "files", "twin"), [
    ("accounts.py", {"shop/accounts.py", "shop/__init__.py", "test_shop.py"}, "shop/accounts.py"),
    ("accounts.py", {"shop/accounts.py", "legacy/accounts.py"}, None),   # which one is not keel's guess
    ("tests/__init__.py", {"shop/__init__.py"}, "shop/__init__.py"),
    ("shop/validators.py", {"shop/accounts.py", "shop/__init__.py"}, None),   # a new module: nothing like it
])
def test_the_one_file_of_that_name_elsewhere(shown: str, files: set[str], twin: str | None) -> None:
    from keel.verify.redirect import same_name_elsewhere
    assert same_name_elsewhere(shown, files) == twin


def test_a_change_to_a_missing_path_names_the_file_of_that_name_and_a_second_call_creates_it(tmp_path: Path):
    """Measured (py-extract-validator): the 1.5B aimed its change to shop/accounts.py at accounts.py,
    and change_file wrote a new top-level module the tests never import."""
    ws = tmp_path / "proj"
    (ws / "shop").mkdir(parents=True)
    (ws / "shop" / "__init__.py").write_text("")
    (ws / "shop" / "shipping.py").write_text(BROKEN)
    (ws / "test_shipping.py").write_text(TESTS.replace("from shipping", "from shop.shipping"))
    result, _ = run_small(ws, [
        {"tool_calls": [call("change_file", path="shipping.py", change="use >=")]},
        {"tool_calls": [call("change_file", path="shop/shipping.py", change="use >=")]},
        {"content": fenced(FIXED)}],
        "A cart of exactly $50 is charged shipping; fix it.")
    replies = [m["content"] for m in result.messages if m.get("role") == "tool"]   # type: ignore[attr-defined]
    assert replies[0].startswith("shipping.py does not exist, and shop/shipping.py does: to change it, call "
                                 "change_file with path shop/shipping.py.")
    assert not (ws / "shipping.py").exists() and (ws / "shop" / "shipping.py").read_text() == FIXED
    assert result.status == "complete"   # type: ignore[attr-defined]

    notes = "TODO\n"
    result, _ = run_small(ws, [
        {"tool_calls": [call("change_file", path="notes/shipping.py", change="a placeholder")]},
        {"tool_calls": [call("change_file", path="notes/shipping.py", change="a placeholder")]},
        {"content": fenced(notes)}],
        "Add notes/shipping.py with a TODO line.")
    assert (ws / "notes" / "shipping.py").read_text() == notes   # sent again: the new file is made


def test_while_the_checks_still_fail_the_result_names_the_files_the_task_names_that_no_change_touched(tmp_path: Path):
    """Measured (py-todo-due): asked to read a due date in parse.py and show it in render.py, the 1.5B
    changed parse.py four times and never render.py."""
    case = EVALS / "py-todo-due"
    ws = tmp_path / "todo"
    ws.mkdir()
    for name in ("parse.py", "render.py", "test_todo.py"):
        (ws / name).write_text((case / "repo" / name).read_text())
    parse = (case / "solution" / "parse.py").read_text()
    result, _ = run_small(ws, [{"tool_calls": [call("change_file", path="parse.py", change="read due:")]},
                               {"content": fenced(parse)}],
                          (case / "task.md").read_text(), candidates=False)
    replies = [m["content"] for m in result.messages if m.get("role") == "tool"]   # type: ignore[attr-defined]
    assert (ws / "parse.py").read_text() == parse
    assert "The task also names render.py, unchanged so far" in replies[0]
    assert "parse.py, unchanged" not in replies[0] and "test_todo.py" not in replies[0].split("also names")[1]

    (ws / "parse.py").write_text((case / "repo" / "parse.py").read_text())
    result, _ = run_small(ws, [{"tool_calls": [call("change_file", path="parse.py", change="read due:")]},
                               {"content": fenced(parse)}],
                          (case / "task.md").read_text(), candidates=False, callee_change=False)
    replies = [m["content"] for m in result.messages if m.get("role") == "tool"]   # type: ignore[attr-defined]
    assert "also names" not in replies[0]   # the assist off: the plain result
