"""The verification gate end to end: the real `keel run` CLI, a scripted engine over real HTTP, real
checks run as subprocesses on real files. Each test is a run a user could see end wrongly without the gate."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import call, make_repo

from keel.testing.server import ScriptedEngineServer

APP = '''import json


def load_settings(path="settings.json"):
    with open(path) as fh:
        data = json.load(fh)
    return {"host": data["host"], "port": data["port"]}
'''
TEST_APP = '''from app import load_settings

settings = load_settings()
assert settings["port"] == 8081, settings
print("OK")
'''
SETTINGS_BROKEN = '{"host": "localhost", "prot": 8081}\n'
TASK = ("The app crashes with a KeyError when it loads settings.json. Find and fix the cause so that "
        "`python test_app.py` prints OK")
PROSE = ("You need to ensure that the port key in settings.json is set to 8081. Here is the updated file:\n"
         '{"host": "localhost", "port": 8081}')
FIX = call("edit_file", path="settings.json", old_text='"prot": 8081', new_text='"port": 8081')


@pytest.fixture
def settings_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "app", {"app.py": APP, "test_app.py": TEST_APP, "settings.json": SETTINGS_BROKEN})


def run(run_keel, server, repo: Path, task: str = TASK, *extra: str):
    return run_keel("run", task, "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                    "--output-format", "json", *extra, timeout=120)


def pushbacks(requests) -> list[str]:
    return [r["messages"][-1]["content"] for r in requests if r["messages"][-1]["role"] == "user"][1:]


def test_the_real_model_scenario_no_longer_ends_complete(settings_repo, run_keel):
    """Qwen2.5-Coder-1.5B's replies, replayed: read, a broken call as text, then the fix told in prose."""
    script = [
        {"tool_calls": [call("read_file", path="settings.json")]},
        {"content": '<tool_call>{"name": "edit_file", "arguments": {"path": "settings.json", "old_text": '},
        {"content": PROSE}, {"content": PROSE}, {"content": PROSE}, {"content": PROSE},
    ]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, settings_repo)
        requests = server.requests
    assert r.code == 1, r.stdout + r.stderr
    res = r.result
    assert res["status"] == "incomplete"
    assert res["stop_reason"] in ("limit:verification", "limit:no_progress")
    assert (settings_repo / "settings.json").read_text() == SETTINGS_BROKEN   # nothing was changed
    texts = pushbacks(requests)
    assert any("no file in the workspace has changed" in t for t in texts), texts
    assert any("KeyError" in t and "python test_app.py" in t for t in texts), texts
    assert res["verification"]["status"] == "failed"
    kinds = [e["type"] for e in r.events()]
    assert "verification_plan" in kinds and "verification" in kinds and "changes" in kinds


def test_a_real_fix_is_verified_and_completes(settings_repo, run_keel):
    script = [{"tool_calls": [call("read_file", path="settings.json")]}, {"tool_calls": [FIX]},
              {"tool_calls": [call("finish", summary="Renamed the misspelt key to port.")]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, settings_repo)
    assert r.code == 0, r.stdout + r.stderr
    res = r.result
    assert res["stop_reason"] == "complete"
    assert res["verification"]["status"] == "passed"
    accept = [c for c in res["verification"]["checks"] if c["category"] == "acceptance"]
    assert accept and accept[0]["command"] == "python test_app.py" and accept[0]["passed"]
    assert [f["path"] for f in res["changes"]["files"]] == ["settings.json"]
    assert "1 file changed" in res["changes"]["diffstat"]
    assert res["changes"]["summary"] == "M settings.json (+1 -1)"


def test_a_wrong_change_with_a_fake_check_is_refused(settings_repo, run_keel):
    wrong = call("edit_file", path="settings.json", old_text='"prot": 8081', new_text='"port": "8081"')
    fake = call("run_shell", command="python3 -c \"print('all good')\"")
    script = [{"tool_calls": [wrong]}, {"tool_calls": [fake]}, {"tool_calls": [call("finish", summary="fixed")]},
              {"tool_calls": [call("edit_file", path="settings.json", old_text='"8081"', new_text="8081")]},
              {"tool_calls": [call("finish", summary="port is a number now")]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, settings_repo)
        requests = server.requests
    assert r.code == 0 and r.result["stop_reason"] == "complete", r.stdout
    refused = pushbacks(requests)
    assert len(refused) == 1 and "AssertionError" in refused[0] and "root cause" in refused[0]


def test_finish_right_after_a_failing_test_run_is_refused(calc_repo, run_keel):
    script = [{"tool_calls": [call("run_shell", command="python -m pytest -q")]},
              {"tool_calls": [call("finish", summary="done")]},
              {"tool_calls": [call("finish", summary="done, really")]},
              {"tool_calls": [call("finish", summary="done, I promise")]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, calc_repo, "fix the failing test")
    assert r.code == 1 and r.result["status"] == "incomplete"
    assert r.result["stop_reason"] in ("limit:verification", "limit:repetition")


def test_repair_cap_stops_with_an_honest_report(calc_repo, run_keel):
    edits = [("return a - b", "return a * b"), ("return a * b", "return a - b - 0"),
             ("return a - b - 0", "return b - a")]
    script: list[dict] = []
    for old, new in edits:
        script += [{"tool_calls": [call("edit_file", path="calc.py", old_text=old, new_text=new)]},
                   {"content": "Fixed."}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, calc_repo, "fix the failing test")
        requests = server.requests
    assert r.code == 1
    res = r.result
    assert res["stop_reason"] == "limit:verification"
    assert len(requests) == 6                       # two repair rounds, then the third claim stops
    failing = [c for c in res["verification"]["checks"] if not c["passed"]]
    assert failing and failing[0]["category"] == "test" and failing[0]["failing_tests"]
    assert Path(failing[0]["output_path"]).is_file()
    assert "test-calc-py" in failing[0]["output_path"]   # the changed file's tests ran first


def test_a_preexisting_failure_does_not_block(tmp_path, run_keel):
    repo = make_repo(tmp_path / "p", {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        "test_legacy.py": "def test_legacy():\n    assert 1 == 2, 'legacy failure'\n",
    })
    add_mul = call("edit_file", path="calc.py", old_text="    return a + b\n",
                   new_text="    return a + b\n\n\ndef mul(a, b):\n    return a * b\n")
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"tool_calls": [add_mul]},
              {"tool_calls": [call("finish", summary="added mul")]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, repo, "add a mul(a, b) function to calc.py")
    assert r.code == 0, r.stdout
    [command] = r.result["verification"]["preexisting_failures"]
    assert command.endswith("-m pytest -q")


def test_accept_flag_gates_completion(calc_repo, run_keel):
    (calc_repo / "check_sum.py").write_text("from calc import add\nassert add(1, 1) == 2\nprint('sum ok')\n")
    fix = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "Nothing to do, add() looks right."},
              {"tool_calls": [fix]},
              {"tool_calls": [call("finish", summary="fixed add")]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, calc_repo, "make add() correct", "--accept", "python check_sum.py")
        requests = server.requests
    assert r.code == 0, r.stdout
    assert "python check_sum.py" in pushbacks(requests)[0]
    checks = {c["command"]: c for c in r.result["verification"]["checks"]}
    assert checks["python check_sum.py"]["passed"] and checks["python check_sum.py"]["source"] == "accept"


def test_overwriting_the_acceptance_script_is_refused(tmp_path, run_keel):
    repo = make_repo(tmp_path / "t", {
        "textutil.py": "def slugify(text):\n    raise NotImplementedError\n",
        "test_textutil.py": "from textutil import slugify\n\nassert slugify('Hello World') == 'hello-world'\n"
                            "print('OK')\n",
    })
    cheat = call("write_file", path="test_textutil.py",
                 content="def slugify(text):\n    return text.lower().replace(' ', '-')\n")
    honest = call("write_file", path="textutil.py",
                  content="def slugify(text):\n    return text.lower().replace(' ', '-')\n")
    restore = call("write_file", path="test_textutil.py",
                   content="from textutil import slugify\n\nassert slugify('Hello World') == 'hello-world'\n"
                           "print('OK')\n")
    read = [call("read_file", path="test_textutil.py"), call("read_file", path="textutil.py")]
    script = [{"tool_calls": read}, {"tool_calls": [cheat]}, {"tool_calls": [call("finish", summary="done")]},
              {"tool_calls": [honest, restore]}, {"tool_calls": [call("finish", summary="implemented")]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, repo, "Implement slugify() so that `python test_textutil.py` prints OK")
        requests = server.requests
    assert r.code == 0, r.stdout
    refusal = pushbacks(requests)[0]
    assert "test_textutil.py" in refusal and "original tests" in refusal


def test_debug_leftovers_are_flagged(calc_repo, run_keel):
    fix = call("edit_file", path="calc.py", old_text="    return a - b",
               new_text="    print('debug', a, b)\n    breakpoint() if False else None\n    return a + b")
    script = [{"tool_calls": [fix]}, {"tool_calls": [call("finish", summary="fixed")]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, calc_repo, "fix add() in calc.py")
    assert r.code == 0, r.stdout
    leftovers = r.result["changes"]["debug_leftovers"]
    assert any("print(" in x for x in leftovers) and any("breakpoint()" in x for x in leftovers)


def test_verify_off_keeps_the_old_rule(calc_repo, run_keel):
    """With the gate off, no check is run by keel: a change is done when the agent's own check passed after
    its last edit (the foundation's rule). A change request with nothing changed is still not done: "Fixed"
    in prose after a read is refused (keel issue 32), and the real fix then completes."""
    fix = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "Fixed: it should add."},
              {"tool_calls": [fix]}, {"tool_calls": [call("run_shell", command="python3 -m pytest -q")]},
              {"content": "add() adds now; the test passes."}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, calc_repo, "fix the failing test", "--verify", "off")
    assert r.result["stop_reason"] == "complete"
    assert "verification" not in r.result and "changes" not in r.result
    events = r.events()
    assert not any(e["type"] == "verification" for e in events)
    assert [e["pushback_kind"] for e in events if e["type"] == "decision" and e.get("pushback_kind")] == ["no_change"]


def test_a_javascript_project_is_gated_by_npm_test(tmp_path, run_keel):
    repo = make_repo(tmp_path / "js", {
        "calc.js": "exports.add = (a, b) => a - b;\n",
        "test.js": 'const assert = require("assert");\nconst { add } = require("./calc");\n'
                   'assert.strictEqual(add(2, 3), 5);\nconsole.log("ok");\n',
        "package.json": '{"name": "calc", "version": "1.0.0", "scripts": {"test": "node test.js"}}\n',
    })
    wrong = call("edit_file", path="calc.js", old_text="a - b", new_text="a * b")
    right = call("edit_file", path="calc.js", old_text="a * b", new_text="a + b")
    script = [{"tool_calls": [call("read_file", path="calc.js")]}, {"tool_calls": [wrong]}, {"content": "Fixed."},
              {"tool_calls": [right]}, {"content": "Fixed add()."}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, repo, "fix add() in calc.js")
        requests = server.requests
    assert r.code == 0, r.stdout
    [refusal] = pushbacks(requests)
    assert "npm test" in refusal and "6" in refusal     # the assertion's actual value reaches the model
    assert [c["command"] for c in r.result["verification"]["checks"]] == ["npm test"]


def test_a_lint_failure_introduced_by_the_change_blocks(tmp_path, run_keel):
    repo = make_repo(tmp_path / "py", {
        "pyproject.toml": '[project]\nname = "calc"\nversion = "0"\n\n[tool.ruff]\nline-length = 100\n\n'
                          '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
        "calc.py": "def add(a, b):\n    return a - b\n",
        "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        "tests/conftest.py": "import sys\nimport pathlib\n\nsys.path.insert(0, str(pathlib.Path(__file__).parent.parent))\n",
    })
    sloppy = call("edit_file", path="calc.py", old_text="def add(a, b):\n    return a - b",
                  new_text="import os\n\n\ndef add(a, b):\n    return a + b")
    tidy = call("edit_file", path="calc.py", old_text="import os\n\n\n", new_text="")
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"tool_calls": [sloppy]},
              {"tool_calls": [call("finish", summary="fixed")]}, {"tool_calls": [tidy]},
              {"tool_calls": [call("finish", summary="fixed, lint clean")]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, repo, "fix add() in calc.py")
        requests = server.requests
    assert r.code == 0, r.stdout
    [refusal] = pushbacks(requests)
    assert "[static] `ruff check" in refusal and "F401" in refusal and "calc.py" in refusal
    categories = [c["category"] for c in r.result["verification"]["checks"]]
    assert categories[0] == "static" and "test" in categories


def test_a_blank_accept_flag_stops_before_any_model_call(calc_repo, run_keel):
    with ScriptedEngineServer([{"content": "unreachable"}]) as server:
        r = run(run_keel, server, calc_repo, "fix the failing test", "--accept", "")
        assert server.requests == []
    assert r.code == 2 and r.result["status"] == "error" and "--accept" in r.result["error"]
