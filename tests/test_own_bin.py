"""keel started by its path from a virtualenv nobody activated (`venv/bin/keel run`): the tools
installed next to it (ruff here) are found by check detection and run by the checks, as they would
be with the venv activated; whatever PATH finds first still wins."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import call, make_repo, path_without

from keel.policy.cmdenv import command_environment, with_own_bin
from keel.testing.server import ScriptedEngineServer
from keel.verify.detect import detect_checks

OWN_BIN = os.path.dirname(sys.executable)
PYPROJECT = '[project]\nname = "calc"\nversion = "0"\n\n[tool.ruff]\nline-length = 100\n'


def own_ruff() -> str:
    ruff = os.path.join(OWN_BIN, "ruff")
    if not os.access(ruff, os.X_OK):
        pytest.skip(f"ruff is not installed next to this Python ({OWN_BIN}): pip install -e '.[dev]'")
    return ruff


def path_lacking_ruff(tmp_path: Path) -> str:
    """This PATH without ruff anywhere on it, nor the directory of the running Python."""
    path = path_without("ruff", tmp_path / "shadow")
    path = os.pathsep.join(d for d in path.split(os.pathsep) if d != OWN_BIN)
    assert shutil.which("ruff", path=path) is None   # the control: a plain PATH search misses it
    return path


def test_own_bin_is_appended_once_and_never_ahead_of_path() -> None:
    assert with_own_bin("/usr/bin:/bin") == f"/usr/bin:/bin:{OWN_BIN}"
    assert with_own_bin(f"{OWN_BIN}:/usr/bin") == f"{OWN_BIN}:/usr/bin"
    assert command_environment({"PATH": "/usr/bin"})["PATH"] == f"/usr/bin:{OWN_BIN}"
    assert "PATH" not in command_environment({})   # no PATH: the shell's default, not ours alone


def test_detection_finds_a_declared_tool_next_to_the_running_python(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ruff = own_ruff()
    repo = make_repo(tmp_path / "py", {"pyproject.toml": PYPROJECT, "calc.py": "X = 1\n"})
    monkeypatch.setenv("PATH", path_lacking_ruff(tmp_path))
    plan = detect_checks(repo)
    [check] = [c for c in plan.checks if c.category == "static"]
    assert check.command == "ruff check ." and f"ruff found at {ruff}" in check.reason


def test_a_run_from_an_unactivated_venv_runs_the_declared_linter(tmp_path: Path, run_keel, keel_env) -> None:
    """The check is not only planned: it runs, and its finding blocks the claim until fixed."""
    own_ruff()
    repo = make_repo(tmp_path / "py", {"pyproject.toml": PYPROJECT, "calc.py": "def add(a, b):\n    return a - b\n"})
    sloppy = call("edit_file", path="calc.py", old_text="def add(a, b):\n    return a - b",
                  new_text="import os\n\n\ndef add(a, b):\n    return a + b")
    tidy = call("edit_file", path="calc.py", old_text="import os\n\n\n", new_text="")
    script = [{"tool_calls": [sloppy]}, {"tool_calls": [call("finish", summary="fixed")]},
              {"tool_calls": [tidy]}, {"tool_calls": [call("finish", summary="fixed, lint clean")]}]
    env = {**keel_env, "PATH": path_lacking_ruff(tmp_path)}
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "make add() add", "--cwd", str(repo), "--base-url", server.base_url, "--model",
                     "scripted", "--output-format", "json", env=env, timeout=120)
        requests = server.requests
    assert r.code == 0, r.stdout + r.stderr
    refusals = [m["messages"][-1]["content"] for m in requests if m["messages"][-1]["role"] == "user"][1:]
    assert len(refusals) == 1 and "[static] `ruff check" in refusals[0] and "F401" in refusals[0]
    assert [c["category"] for c in r.result["verification"]["checks"]] == ["static"]
