"""change_file makes the file move its note or task asks for, and points the importers to the new path
(keel/drive/move.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import git, make_repo

from keel.core.request import parse_request
from keel.drive.move import move_asked, retarget
from keel.testing import ScriptedEngineServer


@pytest.mark.parametrize("path, note, task, expected", [
    # the recorded note (js-rename-module, 1.5B model) and the case's task
    ("lib/utils.js", "Rename the file to lib/strings.js and update everything that requires it.", "", "lib/strings.js"),
    ("lib/utils.js", "update the requires", "lib/utils.js only has string helpers now, so please rename it to "
     "lib/strings.js and update everything that requires it.", "lib/strings.js"),
    ("shop/utils.py", "move shop/utils.py to shop/text/strings.py", "", "shop/text/strings.py"),
    ("lib/utils.js", "rename `utils.js` to `strings.js`", "", "lib/strings.js"),   # a bare name stays in its folder
    ("lib/utils.js", "rename it to ./lib/strings.js", "", "lib/strings.js"),
    # not a move of this file
    ("app.py", "move the helper to utils.py", "", None),
    ("settings.py", "rename MAX_RETRY to MAX_RETRIES", "", None),
    ("lib/utils.js", "rename it to lib/strings.ts", "", None),                   # another kind of file
    ("lib/utils.js", "rename it to ../strings.js", "", "strings.js"),
    ("lib/utils.js", "rename it to ../../strings.js", "", None),                 # out of the workspace
    ("lib/utils.js", "fix the bug", "Rename it to lib/strings.js.", None),     # the task's "it" names no file
    ("lib/utils.js", "fix the bug", "Read lib/utils.js. Then rename it to lib/strings.js.", None),  # another sentence
    ("README", "rename it to README.md", "", None),                              # no suffix: not a module
    ("lib/utils.js", "move it to .git/hooks/pre.js.", "", ".git/hooks/pre.js"),  # read, for the jail to refuse
])
def test_the_move_asked_for(path: str, note: str, task: str, expected: str | None) -> None:
    assert move_asked(path, note, parse_request(task)) == expected


@pytest.mark.parametrize("importer, text, expected", [
    ("lib/report.js", 'const { a } = require("./utils");\n', 'const { a } = require("./strings");\n'),
    ("lib/cli.js", "const { k } = require('./utils.js');\n", "const { k } = require('./strings.js');\n"),
    ("index.js", 'import x from "./lib/utils";\nexport * from "./lib/utils.js";\n',
     'import x from "./lib/strings";\nexport * from "./lib/strings.js";\n'),
    ("test/a.test.js", 'const m = await import("../lib/utils");\n', 'const m = await import("../lib/strings");\n'),
    ("lib/report.js", 'require("./utilsx"); require("utils"); require("../utils"); // ./utils\n',
     'require("./utilsx"); require("utils"); require("../utils"); // ./utils\n'),
    ("lib/types.ts", 'import type { A } from "./utils";\nconst n: number = 1;\n',   # TypeScript: parsed around
     'import type { A } from "./strings";\nconst n: number = 1;\n'),
    ("lib/report.js", 'const path = "./utils"; // require("./utils")\n',   # a string, a comment: not imports
     'const path = "./utils"; // require("./utils")\n'),
])
def test_javascript_specifiers_that_resolve_to_the_old_file_point_to_the_new_one(importer: str, text: str,
                                                                                  expected: str) -> None:
    assert retarget(text, importer, "lib/utils.js", "lib/strings.js") == expected


# Python's imports follow a move through rope: tests/test_refactor.py


# -- through a run: real HTTP to the scripted engine, real files, git and checks -------------------------
UTILS = '"""String helpers."""\r\n\r\n\r\ndef shout(text):\r\n    return text.upper() + "!"\r\n'   # CRLF: bytes kept
REPORT = "from shop.utils import shout\n\n\ndef title(name):\n    return shout(name)\n"
TEST = "from shop.report import title\n\n\ndef test_title():\n    assert title('a') == 'A!'\n"
TASK = "shop/utils.py only has string helpers now: rename it to shop/strings.py and update its imports."


def call(name: str, **args: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def small(keel_env: dict[str, str]) -> None:
    config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[engine]\nprofile = "small"\n')


def repo_with(tmp_path: Path, extra: dict[str, str] | None = None) -> Path:
    ws = make_repo(tmp_path / "repo", {"shop/__init__.py": "", "shop/report.py": REPORT, "tests/test_report.py": TEST,
                                       **(extra or {})})
    (ws / "shop" / "utils.py").write_bytes(UTILS.encode())
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "utils")   # the repository's own identity: a fresh machine has no global one
    return ws


def test_a_run_moves_the_file_points_its_importers_and_undo_puts_everything_back(tmp_path: Path, run_keel,
                                                                                keel_env) -> None:
    small(keel_env)
    ws = repo_with(tmp_path)
    script = [call("change_file", path="shop/utils.py", change="Rename the file to shop/strings.py"),
              call("finish", summary="moved")]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", TASK, "--cwd", str(ws), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json")
        requests = server.requests
    assert r.code == 0, r.stderr
    assert r.result["status"] == "complete"
    assert len(requests) == 2   # no editor request: the move is keel's
    assert not (ws / "shop" / "utils.py").exists()
    assert (ws / "shop" / "strings.py").read_bytes() == UTILS.encode()
    assert (ws / "shop" / "report.py").read_text() == REPORT.replace("shop.utils", "shop.strings")
    reply = next(m["content"] for m in requests[1]["messages"] if m.get("role") == "tool")
    assert "Moved shop/utils.py to shop/strings.py" in reply and "in: shop/report.py." in reply
    assert "No file mentions utils any more." in reply and "`python3 -m pytest -q` pass" in reply
    undone = run_keel("undo", "--cwd", str(ws))
    assert undone.code == 0, undone.stderr
    assert (ws / "shop" / "utils.py").read_bytes() == UTILS.encode() and not (ws / "shop" / "strings.py").exists()
    assert (ws / "shop" / "report.py").read_text() == REPORT


def run_small(ws: Path, script: list[dict[str, Any]], keel_env: dict[str, str], run_keel,
              task: str = TASK) -> tuple[Any, list[str]]:
    with ScriptedEngineServer([*script, call("finish", summary="done")]) as server:
        r = run_keel("run", task, "--cwd", str(ws), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json")
        replies = [m["content"] for m in server.requests[-1]["messages"] if m.get("role") == "tool"]
    return r, replies


def test_a_test_that_imports_the_old_module_is_listed_not_rewritten(tmp_path: Path, run_keel, keel_env) -> None:
    small(keel_env)
    old_test = "from shop.utils import shout\n\n\ndef test_shout():\n    assert shout('a') == 'A!'\n"
    ws = repo_with(tmp_path, {"tests/test_utils.py": old_test})
    _, replies = run_small(ws, [call("change_file", path="shop/utils.py", change="move it to shop/strings.py")],
                           keel_env, run_keel)
    assert (ws / "tests" / "test_utils.py").read_text() == old_test
    assert "Left as they were: tests/test_utils.py (a test, and the task does not ask to change tests)." in replies[0]
    assert "  tests/test_utils.py:1: from shop.utils import shout" in replies[0]


def test_asked_again_after_the_move_the_old_file_is_not_written_back(tmp_path: Path, run_keel, keel_env) -> None:
    small(keel_env)
    ws = repo_with(tmp_path)
    move = call("change_file", path="shop/utils.py", change="Rename the file to shop/strings.py")
    again = call("change_file", path="shop/utils.py", change="update everything that imports it")
    _, replies = run_small(ws, [move, again], keel_env, run_keel)
    assert replies[1] == "shop/utils.py does not exist: it was moved to shop/strings.py; change shop/strings.py instead."
    assert not (ws / "shop" / "utils.py").exists()


def test_a_target_that_exists_is_refused_and_nothing_changes(tmp_path: Path, run_keel, keel_env) -> None:
    small(keel_env)
    ws = repo_with(tmp_path, {"shop/strings.py": "X = 1\n"})
    _, replies = run_small(ws, [call("change_file", path="shop/utils.py", change="move it to shop/strings.py")],
                           keel_env, run_keel)
    assert replies[0].startswith("Cannot move shop/utils.py to shop/strings.py: shop/strings.py exists already.")
    assert (ws / "shop" / "utils.py").read_bytes() == UTILS.encode() and (ws / "shop/strings.py").read_text() == "X = 1\n"
    assert (ws / "shop" / "report.py").read_text() == REPORT


def test_a_move_into_a_link_out_of_the_workspace_writes_nothing_outside(tmp_path: Path, run_keel, keel_env) -> None:
    small(keel_env)
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = repo_with(tmp_path)
    (ws / "out").symlink_to(outside, target_is_directory=True)
    _, replies = run_small(ws, [call("change_file", path="shop/utils.py", change="move it to out/strings.py")],
                           keel_env, run_keel)
    assert replies[0].startswith("Cannot move shop/utils.py to out/strings.py:")
    assert list(outside.iterdir()) == []
    assert (ws / "shop" / "utils.py").read_bytes() == UTILS.encode() and (ws / "shop" / "report.py").read_text() == REPORT


def test_a_move_into_git_internals_is_refused(tmp_path: Path, run_keel, keel_env) -> None:
    """A file moved into .git/hooks would run at the user's next commit, outside any sandbox."""
    small(keel_env)
    ws = repo_with(tmp_path)
    _, replies = run_small(ws, [call("change_file", path="shop/utils.py", change="move it to .git/hooks/pre.py")],
                           keel_env, run_keel, task="Tidy up shop/utils.py.")
    assert replies[0].startswith("Cannot move shop/utils.py to .git/hooks/pre.py:") and "inside .git" in replies[0]
    assert not (ws / ".git" / "hooks" / "pre.py").exists()
    assert (ws / "shop" / "utils.py").read_bytes() == UTILS.encode()
