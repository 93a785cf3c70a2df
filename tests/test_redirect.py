"""A change aimed at the project's tests is answered with where to go instead: the module the test
file tests and the assertion that fails (keel.verify.redirect, keel.verify.failing)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CALC, TEST_CALC, call, make_repo

from keel.agent import Agent
from keel.config import Config
from keel.outputs.summarize import summarize_failure
from keel.testing import ScriptedEngineServer
from keel.verify.failing import failing_assertion
from keel.verify.redirect import UnderTest, missing_module, modules_under_test, redirect, redirect_to

FIXED = CALC.replace("a - b", "a + b")


# ---- the modules a test file tests ----------------------------------------------------------------

@pytest.mark.parametrize(("test_path", "text", "files", "expected"), [
    # Python: from-import, plain import (names from its uses), nested test folder, src layout
    ("test_calc.py", "from calc import add, sub\n", {"calc.py"}, [UnderTest("calc.py", ("add", "sub"))]),
    ("test_calc.py", "import calc\n\ndef test():\n    assert calc.add(1, 2) == calc.mul(1, 3)\n", {"calc.py"},
     [UnderTest("calc.py", ("add", "mul"))]),
    ("tests/test_calc.py", "from calc import add\n", {"src/calc.py", "lib/calc.py"}, [UnderTest("src/calc.py", ("add",))]),
    ("tests/test_shop.py", "from shop.cart import (\n    total,\n    Cart,\n)\n",
     {"src/shop/__init__.py", "src/shop/cart.py"}, [UnderTest("src/shop/cart.py", ("total", "Cart"))]),
    # `from pkg import module`: the module itself, not the package's __init__
    ("test_m.py", "from pkg import calc\n", {"pkg/__init__.py", "pkg/calc.py"}, [UnderTest("pkg/calc.py")]),
    # relative imports, one and two levels
    ("pkg/test_calc.py", "from .calc import add\n", {"pkg/calc.py"}, [UnderTest("pkg/calc.py", ("add",))]),
    ("pkg/tests/test_calc.py", "from ..calc import add\n", {"pkg/calc.py"}, [UnderTest("pkg/calc.py", ("add",))]),
    # packages that are not in the workspace, and test helpers, are not the code under test
    ("test_calc.py", "import os\nimport pytest\nfrom conftest import data\nfrom calc import add\n",
     {"calc.py", "conftest.py"}, [UnderTest("calc.py", ("add",))]),
    # a test the model broke still names its imports
    ("test_calc.py", "from calc import add\n\ndef test(:\n", {"calc.py"}, [UnderTest("calc.py", ("add",))]),
    # JavaScript: require with destructuring, ESM with renames, TypeScript's .js for .ts, a folder's index
    ("calc.test.js", "const { add, sub: minus } = require('./calc');\n", {"calc.js"},
     [UnderTest("calc.js", ("add", "sub"))]),
    ("test/calc.test.mjs", "import test from 'node:test';\nimport { add, sub as minus } from '../lib/calc.js';\n",
     {"lib/calc.js"}, [UnderTest("lib/calc.js", ("add", "sub"))]),
    ("calc.test.ts", "import { add } from './calc.js';\n", {"calc.ts"}, [UnderTest("calc.ts", ("add",))]),
    ("app.test.js", "const app = require('./app');\n", {"app/index.js"}, [UnderTest("app/index.js")]),
    # no import of a workspace file: the name says which file (its own folder first)
    ("test_calc.py", "def test():\n    assert True\n", {"calc.py"}, [UnderTest("calc.py")]),
    ("tests/test_calc.py", "import pytest\n", {"src/calc.py", "tests/calc.py", "docs/x/calc.py"},
     [UnderTest("src/calc.py")]),   # tests/calc.py is in a test folder: not the code under test
    ("calc.test.js", "test('adds', () => {});\n", {"calc.js"}, [UnderTest("calc.js")]),
    ("calc_test.go", "package calc\n", {"calc.go"}, [UnderTest("calc.go")]),
    # a module outside the workspace is never named, even when a listing holds it
    ("test_calc.py", "from ..calc import add\n", {"../calc.py"}, []),
    ("calc.test.js", "const { add } = require('../../elsewhere/calc');\n", {"../../elsewhere/calc.js"}, []),
    ("test_calc.py", "import pytest\n", set(), []),
])
def test_tested_modules(test_path: str, text: str, files: set[str], expected: list[UnderTest]) -> None:
    assert modules_under_test(test_path, text, {*files, test_path}) == expected


def test_the_refusal_names_the_module_the_assertion_and_the_next_call_without_example_values():
    text = redirect("test_calc.py", [UnderTest("calc.py", ("add",))], "assert add(2, 3) == 5\nAssertionError: x")
    assert text.startswith("test_calc.py holds the project's tests")
    assert "The code it tests is in calc.py (imported: add)." in text
    assert "The failing check:\n    assert add(2, 3) == 5\n    AssertionError: x\n" in text
    assert text.endswith("Call change_file with path calc.py and say what must change there.")
    bare = redirect("test_x.py", [], "")
    assert bare.endswith("does not ask to change them. Change the code they test.")


@pytest.mark.parametrize(("tested", "protected", "target"), [
    ([UnderTest("calc.py", ("add",))], set(), "calc.py"),
    ([UnderTest("calc.py"), UnderTest("fmt.py")], set(), None),       # several: the model chooses
    ([UnderTest("calc.py"), UnderTest("fmt.py")], {"fmt.py"}, None),  # still several it tests
    ([UnderTest("conftest_data.py")], {"conftest_data.py"}, None),    # protected itself
    ([], set(), None),                                                # none in the workspace (yet)
])
def test_which_module_a_change_to_a_test_goes_to(tested, protected, target):
    assert redirect_to(tested, protected) == target


# ---- the failing assertion, from real test runs ---------------------------------------------------

def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def _run(cwd: Path, *command: str) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done.stdout
    return done.stdout + done.stderr


PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")


@pytest.mark.parametrize("tb", ["--tb=long", "--tb=short", "--tb=auto"])
def test_the_assertion_from_pytest(tmp_path: Path, tb: str):
    ws = _project(tmp_path, {"calc.py": CALC, "test_calc.py": TEST_CALC + "\n\ndef test_zero():\n    assert add(0, 0) == 0\n"})
    assert failing_assertion(_run(ws, *PYTEST, tb)) == ("assert add(2, 3) == 5\nAssertionError: assert -1 == 5\n"
                                                         "+  where -1 = add(2, 3)")


def test_an_error_inside_the_code_shows_the_tests_line_and_the_error(tmp_path: Path):
    ws = _project(tmp_path, {"calc.py": "def add(a, b):\n    return a / 0\n", "test_calc.py": TEST_CALC})
    assert failing_assertion(_run(ws, *PYTEST)) == "assert add(2, 3) == 5\nZeroDivisionError: division by zero"


def test_an_import_error_is_the_error_itself(tmp_path: Path):
    ws = _project(tmp_path, {"calc.py": "def plus(a, b):\n    return a + b\n", "test_calc.py": TEST_CALC})
    found = failing_assertion(_run(ws, *PYTEST))
    assert found.startswith("from calc import add\nImportError: cannot import name 'add' from 'calc'"), found


def test_the_failure_in_the_test_file_at_hand_comes_first(tmp_path: Path):
    ws = _project(tmp_path, {"calc.py": CALC, "test_calc.py": TEST_CALC,
                             "test_more.py": "from calc import add\n\ndef test_more():\n    assert add(1, 1) == 2\n"})
    output = _run(ws, *PYTEST)
    assert failing_assertion(output).startswith("assert add(2, 3) == 5")
    more = (ws / "test_more.py").read_text()
    assert failing_assertion(output, {"test_more.py": more}).startswith("assert add(1, 1) == 2")


def test_the_assertion_from_unittest(tmp_path: Path):
    ws = _project(tmp_path, {"calc.py": CALC, "test_calc.py": "import unittest\nfrom calc import add\n\n\n"
                             "class T(unittest.TestCase):\n    def test_add(self):\n"
                             "        self.assertEqual(add(2, 3), 5)\n"})
    assert failing_assertion(_run(ws, sys.executable, "-m", "unittest")) == \
        "self.assertEqual(add(2, 3), 5)\nAssertionError: -1 != 5"


def test_the_assertion_from_keels_own_summary_with_the_test_files_line(tmp_path: Path):
    ws = _project(tmp_path, {"calc.py": CALC, "test_calc.py": TEST_CALC})
    summary = summarize_failure("pytest -q", _run(ws, *PYTEST), 1, timed_out=False, workspace=str(ws)).text()
    assert failing_assertion(summary, {"test_calc.py": TEST_CALC}) == \
        "assert add(2, 3) == 5\nAssertionError: assert -1 == 5\n+  where -1 = add(2, 3)"
    assert failing_assertion("1 failed, 2 passed\n") == ""


JS_CALC = "exports.add = (a, b) => a - b;\n"
JS_TEST = ("const test = require('node:test');\nconst assert = require('node:assert');\n"
           "const { add } = require('./calc');\n\ntest('adds', () => {\n  assert.strictEqual(add(2, 3), 5);\n});\n")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("reporter", ["tap", "spec"])
def test_the_assertion_from_node_test(tmp_path: Path, reporter: str):
    ws = _project(tmp_path, {"calc.js": JS_CALC, "calc.test.js": JS_TEST})
    output = _run(ws, "node", "--test", f"--test-reporter={reporter}")
    assert failing_assertion(output, {"calc.test.js": JS_TEST}) == \
        "assert.strictEqual(add(2, 3), 5);\nAssertionError: Expected values to be strictly equal: -1 !== 5"
    assert failing_assertion(output).endswith("-1 !== 5")   # without the test's text: the error alone


# ---- in a run: the tool result the model sees ------------------------------------------------------

def _small_profile(env: dict[str, str]) -> None:
    config = Path(env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[engine]\nprofile = "small"\n')


def _fix_the_failing_test(run_keel, repo: Path, script: list[dict]):
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "fix the failing test", "--cwd", str(repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", timeout=120)
    assert r.code == 0, r.stderr
    return r, server.requests


def test_a_change_aimed_at_a_test_of_one_module_is_made_in_that_module_from_the_task(
        tmp_path: Path, run_keel, keel_env: dict[str, str]):
    """The 1.5B model sent a change_file of the test three times after being told which module to
    change (py-cli-json-output): with one module under test, the change goes there itself."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "test_calc.py": TEST_CALC})
    _small_profile(keel_env)
    script = [{"tool_calls": [call("read_file", path="test_calc.py")]},
              {"tool_calls": [call("change_file", path="test_calc.py", change="expect the result add returns")]},
              {"content": f"```python\n{FIXED}```\n"},   # the editor request: for calc.py
              {"tool_calls": [call("finish", summary="add() adds; the test passes")]}]
    r, requests = _fix_the_failing_test(run_keel, repo, script)
    editor = requests[2]["messages"][-1]["content"]
    assert "calc.py" in editor and "def add(a, b):" in editor and "fix the failing test" in editor
    assert "expect the result add returns" not in editor   # the model's test edit is not the request
    result = requests[3]["messages"][-1]
    assert result["role"] == "tool"
    assert result["content"].startswith("test_calc.py holds the project's tests and the task does not ask to "
                                        "change them, so the change was made in calc.py, the code they test")
    assert (repo / "test_calc.py").read_text() == TEST_CALC
    assert (repo / "calc.py").read_text() == FIXED and r.result["status"] == "complete"


def test_a_test_of_two_modules_is_refused_with_both_named_and_the_failing_assertion(
        tmp_path: Path, run_keel, keel_env: dict[str, str]):
    two = "from calc import add\nfrom fmt import show\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "fmt.py": "def show(x):\n    return str(x)\n",
                                         "test_calc.py": two})
    _small_profile(keel_env)
    script = [{"tool_calls": [call("change_file", path="test_calc.py", change="expect the result add returns")]},
              {"tool_calls": [call("change_file", path="calc.py", change="add must add its arguments")]},
              {"content": f"```python\n{FIXED}```\n"},
              {"tool_calls": [call("finish", summary="add() adds; the test passes")]}]
    r, requests = _fix_the_failing_test(run_keel, repo, script)
    text = requests[1]["messages"][-1]["content"]
    assert "test_calc.py holds the project's tests" in text
    assert "The code it tests is in calc.py (imported: add) and fmt.py (imported: show)." in text
    assert "    assert add(2, 3) == 5\n    AssertionError: assert -1 == 5\n" in text
    assert text.rstrip().endswith("Call change_file with path calc.py and say what must change there.")
    assert (repo / "test_calc.py").read_text() == two
    assert (repo / "calc.py").read_text() == FIXED and r.result["status"] == "complete"


@pytest.mark.parametrize(("test_path", "text", "files", "expected"), [
    ("tests/test_validators.py", "from shop.validators import is_valid_email\n",
     {"shop/__init__.py", "shop/accounts.py"}, "shop/validators.py"),            # the package is there
    ("tests/test_v.py", "import shop.validators as v\n", {"src/shop/__init__.py"}, "src/shop/validators.py"),
    ("pkg/tests/test_v.py", "from ..validators import check\n", {"pkg/__init__.py"}, "pkg/validators.py"),
    ("tests/test_v.py", "from shop.validators import check\n", {"shop/accounts.py"}, None),  # no package
    ("test_v.py", "from validators import check\n", {"shop/__init__.py"}, None),    # a top-level name: where?
    ("tests/test_v.py", "from shop.validators import check\n",
     {"shop/__init__.py", "shop/validators.py"}, None),                            # it exists: not missing
    ("tests/test_v.py", "from shop import validators\n", {"shop/__init__.py", "shop/validators.py"}, None),
    ("tests/test_v.py", "from shop.a import x\nfrom shop.b import y\n", {"shop/__init__.py"}, None),  # two
    ("tests/test_v.py", "from requests.adapters import x\n", {"shop/__init__.py"}, None),   # not ours
    ("v.test.js", "const { check } = require('./shop/validators');\n", {"shop/index.js"}, None),
])
def test_the_module_a_test_imports_that_is_not_written_yet(test_path, text, files, expected):
    assert missing_module(test_path, text, files) == expected


VALIDATOR_TEST = ("from shop.validators import is_valid_email\n\n\ndef test_valid():\n"
                  "    assert is_valid_email(\"ann@example.com\")\n")
VALIDATOR = "def is_valid_email(address):\n    return \"@\" in address\n"


def test_a_change_aimed_at_a_test_of_a_module_not_written_yet_writes_that_module(
        tmp_path: Path, run_keel, keel_env: dict[str, str]):
    """py-extract-validator on the 1.5B: the test imports shop.validators, which the task asks to create;
    the model sent the same change_file of the test three times and was refused each time."""
    repo = make_repo(tmp_path / "repo", {"shop/__init__.py": "", "tests/test_validators.py": VALIDATOR_TEST})
    _small_profile(keel_env)
    script = [{"tool_calls": [call("change_file", path="tests/test_validators.py", change="use is_valid_email")]},
              {"content": f"```python\n{VALIDATOR}```\n"},   # the editor request: for shop/validators.py
              {"tool_calls": [call("finish", summary="shop/validators.py holds is_valid_email")]}]
    r, requests = _fix_the_failing_test(run_keel, repo, script)
    editor = requests[1]["messages"][-1]["content"]
    assert "shop/validators.py does not exist yet" in editor and "fix the failing test" in editor, editor
    assert "so the change was made in shop/validators.py" in requests[2]["messages"][-1]["content"]
    assert (repo / "tests/test_validators.py").read_text() == VALIDATOR_TEST
    assert (repo / "shop/validators.py").read_text() == VALIDATOR and r.result["status"] == "complete"


def test_without_a_saved_output_the_summary_and_the_test_file_give_the_assertion(tmp_path: Path):
    ws = _project(tmp_path / "ws", {"calc.py": CALC, "lib.py": "X = 1\n",
                                    "tests/test_calc.py": TEST_CALC.replace("add\n", "add\nimport lib\n", 1)})
    script = [{"tool_calls": [call("change_file", path="tests/test_calc.py", change="expect what add returns")]},
              {"tool_calls": [call("finish", summary="nothing")]}]
    with ScriptedEngineServer([*script, *script[1:] * 3]) as server:
        cfg = Config()
        cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", "small"
        result = Agent(workspace=ws, config=cfg, log_path=False).run("add is wrong; fix it")
    text = next(m["content"] for m in result.messages if m.get("role") == "tool")
    assert "The code it tests is in calc.py (imported: add) and lib.py." in text, text
    assert "    assert add(2, 3) == 5\n    AssertionError: assert -1 == 5\n" in text
    assert "Call change_file with path calc.py" in text


# ---- a change aimed at the task's spec document (INSTRUCTIONS.md) goes to the code it specifies ------------
@pytest.mark.parametrize(("task", "docs"), [
    ("Please do the exercise in INSTRUCTIONS.md: brackets.js has the two functions as stubs.", ("INSTRUCTIONS.md",)),
    ("Solve the exercise described in INSTRUCTIONS.md. The code goes in rle.py.", ("INSTRUCTIONS.md",)),
    ("Implement the parser as SPEC.md describes.", ("SPEC.md",)),
    ("Make cli.py behave according to docs/cli.rst.", ("docs/cli.rst",)),
    ("Update README.md so it describes the --json flag.", ()),          # the document is what changes
    ("Fix the typo in docs/usage.md and the bug in cli.py.", ()),
    ("Add a section to CHANGELOG.md for the new flag.", ()),
])
def test_the_documents_a_request_makes_its_spec(task: str, docs: tuple[str, ...]) -> None:
    from keel.core.request import parse_request
    assert parse_request(task).spec_documents == docs


def test_where_a_change_aimed_at_the_spec_goes() -> None:
    from keel.verify.redirect import spec_redirect
    files = {"INSTRUCTIONS.md", "rle.py", "rle_test.py", "README.md"}
    assert spec_redirect("INSTRUCTIONS.md", ("INSTRUCTIONS.md", "rle.py", "rle_test.py"), files, ())[0] == "rle.py"
    target, words = spec_redirect("INSTRUCTIONS.md", ("INSTRUCTIONS.md",), files, ())   # no code file named
    assert target is None and "INSTRUCTIONS.md is the task's spec" in words
    target, words = spec_redirect("SPEC.md", ("SPEC.md", "a.py", "b.py"), files | {"a.py", "b.py"}, ())
    assert target is None and "The code goes in a.py or b.py" in words


def test_a_change_aimed_at_the_exercise_instructions_is_made_in_the_module_the_task_names(tmp_path: Path):
    """Measured (js-spec-brackets): the 1.5B aimed four change_file calls at INSTRUCTIONS.md and never
    touched the stub file the task named; the spec was rewritten to 40 lines."""
    case = Path(__file__).resolve().parent.parent / "evals" / "py-spec-instructions"
    ws = tmp_path / "rle"
    shutil.copytree(case / "repo", ws)
    spec, solved = (ws / "INSTRUCTIONS.md").read_text(), (case / "solution" / "rle.py").read_text()
    script = [{"tool_calls": [call("change_file", path="INSTRUCTIONS.md", change="implement encode and decode")]},
              {"content": f"```python\n{solved}```"},
              {"tool_calls": [call("finish", summary="done")]}]
    with ScriptedEngineServer(script) as server:
        cfg = Config()
        cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", "small"
        result = Agent(workspace=ws, config=cfg, log_path=tmp_path / "s.jsonl").run((case / "task.md").read_text())
        editor = server.requests[1]["messages"][1]["content"]
    assert (ws / "INSTRUCTIONS.md").read_text() == spec and (ws / "rle.py").read_text() == solved
    assert "Write the code INSTRUCTIONS.md asks for in rle.py" in editor
    reply = next(m["content"] for m in result.messages if m.get("role") == "tool")
    assert reply.startswith("INSTRUCTIONS.md is the task's spec and stays as it is, so the change was made in rle.py")
    assert result.status == "complete"
