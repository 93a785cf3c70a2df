"""trial_calls (keel.verify.trial): asked what is wrong, an all-clear answer is sent back with what the
reviewed functions return on small inputs, run by keel in a scratch copy inside the sandbox.

Measured on the 1.5B (py-review-pagination): told to try the edge cases in its head, the model said
"correct" three times; paginate(list(range(10)), 1, 3) returns [3, 4, 5] where pages start at 1."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import call, make_repo

from keel.testing.server import ScriptedEngineServer
from keel.verify.trial import module_name, trial_calls, trial_command, trial_text

PAGINATE = ('def paginate(items, page, per_page):\n    """Return the items on page `page`. Page numbers start at '
            '1."""\n    start = page * per_page\n    return items[start:start + per_page]\n\n\n'
            'def page_count(items, per_page):\n    return (len(items) + per_page - 1) // per_page\n')
TEST_PAGINATE = "from pagination import page_count\n\n\ndef test_count():\n    assert page_count(list(range(10)), 3) == 4\n"
REVIEW = "Review pagination.py and tell me what is wrong with it. Don't change any files."
READ = {"tool_calls": [call("read_file", path="pagination.py")]}
CLEAR = {"tool_calls": [call("finish", summary="pagination.py is correct and does not need any changes.")]}
FOUND = {"tool_calls": [call("finish", summary="paginate(items, 1, 3) returns [3, 4, 5]: it skips the first page; "
                                               "start must be (page - 1) * per_page.")]}
SHOWN = "paginate(list(range(10)), 1, 3) returned [3, 4, 5]"


def _run(run_keel, repo: Path, script: list[dict], assists: str):
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", REVIEW, "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json", "--assists", assists, timeout=180)
        return r, server.requests, server.remaining


def _last_user_text(request: dict) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"][-3:])


def _status(repo: Path) -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, text=True,
                         capture_output=True, check=True).stdout
    return [line for line in out.splitlines() if "__pycache__" not in line and ".pytest_cache" not in line]


def test_an_all_clear_comes_back_with_what_the_functions_return(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "pages", {"pagination.py": PAGINATE, "test_pagination.py": TEST_PAGINATE})
    r, requests, left = _run(run_keel, repo, [READ, CLEAR, FOUND], "trial_calls=on")
    assert r.result["status"] == "complete" and left == 0, r.stdout
    after = _last_user_text(requests[2])
    assert SHOWN in after and "page_count(list(range(10)), 3) returned 4" in after, after
    assert [e["name"] for e in r.events() if e["type"] == "assist"].count("trial_calls") == 1
    assert _status(repo) == []


def test_control_with_the_assist_off_the_pushback_has_no_results(tmp_path: Path, run_keel):
    repo = make_repo(tmp_path / "pages", {"pagination.py": PAGINATE, "test_pagination.py": TEST_PAGINATE})
    r, requests, left = _run(run_keel, repo, [READ, CLEAR, FOUND], "trial_calls=off")
    assert r.result["status"] == "complete" and left == 0, r.stdout
    assert "returned" not in _last_user_text(requests[2])
    assert "trial_calls" not in [e.get("name") for e in r.events() if e["type"] == "assist"]


def test_a_function_that_writes_files_changes_nothing_in_the_workspace(tmp_path: Path, run_keel):
    """The calls run in a scratch copy: a reviewed function that writes and deletes leaves the workspace
    as it was, so the answer is not refused as a change. Control: the same call run in the workspace
    itself does write."""
    writer = ("\n\ndef save(text):\n    open('out.txt', 'w').write(text)\n    os.remove('pagination.py')\n"
              "    return len(text)\n")
    repo = make_repo(tmp_path / "pages", {"pagination.py": "import os\n\n\n" + PAGINATE + writer,
                                          "test_pagination.py": TEST_PAGINATE})
    r, requests, left = _run(run_keel, repo, [READ, CLEAR, FOUND], "trial_calls=on")
    assert r.result["status"] == "complete" and left == 0, r.stdout
    assert "save('Hello world') returned 11" in _last_user_text(requests[2])
    assert _status(repo) == [] and not (repo / "out.txt").exists()
    control = subprocess.run(trial_command("pagination", ["save('Hello world')"]), shell=True, cwd=repo,
                             capture_output=True, text=True)
    assert "returned 11" in control.stdout and (repo / "out.txt").exists()


@pytest.mark.parametrize(("source", "calls"), [
    (PAGINATE, ["paginate(list(range(10)), 1, 3)", "paginate([], 1, 3)", "page_count(list(range(10)), 3)",
                "page_count([], 3)"]),
    ("def add(a, b):\n    return a - b\n", ["add(2, 3)"]),
    ("def slug(text, sep='-'):\n    return text\n", ["slug('Hello world')"]),          # a default is left to it
    ("def load(path_to_db):\n    pass\n", []),                                       # nothing keel can guess
    ("def _helper(items):\n    pass\n\n\nclass A:\n    def m(self, items):\n        pass\n", []),
    ("def broken(:\n", []),
])
def test_the_calls_come_from_the_parameter_names(source: str, calls: list[str]):
    assert trial_calls(source) == calls


@pytest.mark.parametrize(("path", "module"), [
    ("pagination.py", "pagination"), ("src/pkg/mod.py", "pkg.mod"), ("pkg/__init__.py", None),
    ("my-script.py", None), ("notes.md", None)])
def test_the_module_a_file_imports_as(path: str, module: str | None):
    assert module_name(path) == module


def test_a_call_that_raises_or_yields_is_shown_as_such(tmp_path: Path):
    (tmp_path / "m.py").write_text("def first(items):\n    return items[0]\n\n\ndef each(items):\n"
                                   "    yield from items\n")
    out = subprocess.run(trial_command("m", trial_calls((tmp_path / "m.py").read_text())), shell=True,
                         cwd=tmp_path, capture_output=True, text=True).stdout
    assert "first([]) raised IndexError: list index out of range" in out
    assert "each(list(range(10))) returned [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in out
    assert trial_text([("m.py", out)]).startswith("keel ran the functions with small inputs")
    assert trial_text([]) == ""
