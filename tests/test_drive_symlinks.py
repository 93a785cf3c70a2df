"""change_file's two ways of writing a file the model did not name — a rename carried to the other
files that use the old name, and a change aimed at a test redirected to the code it tests — tried as
an attacker would: the other file is a symlink to a file outside the workspace, or is swapped for one
while the change is made. Nothing outside the workspace may change, in any of them."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CALC, TEST_CALC, make_repo
from test_rename import CLIENT, PLAIN_TASK, SETTINGS, TASK, call, fenced, renamed, run_script, small_agent

from keel.testing import ScriptedEngineServer

SECRET = "MAX_RETRY = 3\nPASSWORD = 'hunter2'\n"   # uses the old name, so a rename would want it too


def outside_file(tmp_path: Path, name: str, text: str) -> Path:
    target = tmp_path / "outside" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


# The rename comes from the rewrite the model's note asked for (one editor request), or from the task's own
# words (keel refactors with no editor request): both ways, nothing outside the workspace changes.
BOTH_WAYS = pytest.mark.parametrize("task, editor", [(PLAIN_TASK, 1), (TASK, 0)], ids=["from-the-note", "from-the-task"])


@BOTH_WAYS
def test_a_rename_never_follows_a_symlink_out_of_the_workspace(tmp_path: Path, task: str, editor: int):
    secret = outside_file(tmp_path, "secret.py", SECRET)
    ws = make_repo(tmp_path / "ws", {"settings.py": SETTINGS, "client.py": CLIENT})
    os.symlink(secret, ws / "leak.py")
    reply, asked = run_script(ws, [{"tool_calls": [call("change_file", path="settings.py",
                                                        change="rename MAX_RETRY to MAX_RETRIES")]},
                                   fenced(renamed(SETTINGS))], verify=False, task=task)
    assert asked == editor, reply   # client.py is refactored, the link not at all
    assert (ws / "settings.py").read_text() == renamed(SETTINGS)
    assert secret.read_text() == SECRET and os.path.islink(ws / "leak.py")
    assert (ws / "client.py").read_text() == renamed(CLIENT)
    assert "hunter2" not in reply


def test_a_file_swapped_for_a_symlink_while_the_rename_is_made_is_not_written_through(tmp_path: Path):
    secret = outside_file(tmp_path, "secret.py", SECRET)
    ws = make_repo(tmp_path / "ws", {"settings.py": SETTINGS, "client.py": CLIENT})
    late: dict[str, Any] = {**fenced(renamed(SETTINGS)), "delay_s": 1.0}
    script = [{"tool_calls": [call("change_file", path="settings.py", change="rename MAX_RETRY to MAX_RETRIES")]},
              late, {"tool_calls": [call("finish", summary="done")]}]
    with ScriptedEngineServer(script) as server:
        def swap() -> None:   # while settings.py's editor request is out: client.py's rename comes after it
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and len(server.requests) < 2:
                time.sleep(0.02)
            (ws / "client.py").unlink()
            os.symlink(secret, ws / "client.py")

        swapper = threading.Thread(target=swap)
        swapper.start()
        result = small_agent(server, ws, verify=False).run(PLAIN_TASK)
        swapper.join()
    reply = next(m["content"] for m in result.messages if m.get("role") == "tool")
    assert (ws / "settings.py").read_text() == renamed(SETTINGS), reply
    assert secret.read_text() == SECRET, reply
    assert os.path.islink(ws / "client.py")   # the link itself was not replaced by a file either
    assert "Renamed" not in reply


def test_a_redirect_to_a_module_that_is_a_symlink_out_of_the_workspace_writes_nothing_there(tmp_path: Path):
    secret = outside_file(tmp_path, "calc.py", CALC)
    ws = make_repo(tmp_path / "ws", {"test_calc.py": TEST_CALC})
    os.symlink(secret, ws / "calc.py")
    reply, asked = run_script(ws, [{"tool_calls": [call("change_file", path="test_calc.py",
                                                        change="expect what add returns")]},
                                   fenced(CALC.replace("a - b", "a + b"))], verify=True,
                              task="fix the failing test")
    assert secret.read_text() == CALC, reply
    assert (ws / "test_calc.py").read_text() == TEST_CALC
    assert os.path.islink(ws / "calc.py")


@BOTH_WAYS
def test_a_task_cannot_steer_a_rename_out_of_the_workspace(tmp_path: Path, task: str, editor: int):
    secret = outside_file(tmp_path, "settings.py", SECRET)
    ws = make_repo(tmp_path / "ws", {"settings.py": SETTINGS, "client.py": CLIENT})
    task = f"{task}; also in ../outside/settings.py and {secret}"
    reply, asked = run_script(ws, [{"tool_calls": [call("change_file", path="settings.py",
                                                        change=f"rename MAX_RETRY to MAX_RETRIES, also in {secret}")]},
                                   fenced(renamed(SETTINGS))], verify=False, task=task)
    assert asked == editor and secret.read_text() == SECRET, reply
    assert (ws / "client.py").read_text() == renamed(CLIENT)
