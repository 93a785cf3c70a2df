"""Hooks run in the OS sandbox (issue 34, item 1), tried as an attacker would: the model rewrites the
script (or the Makefile) a hook runs, and keel, run for real as the test runner (root) and as the
unprivileged ``kuser`` against the scripted engine, runs that hook on each tier. The rewritten hook
tries to write outside the workspace and to read keel's API key; a control runs the same hook
command with no keel and shows it would have. Hooks that only format or check still work sandboxed,
a sandboxed hook reads its own transcript, and a hook the user runs outside the sandbox is kept in
it when the session wrote its script.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bwrap_runner import (
    as_user,
    ensure_unprivileged_user,
    make_workspace,
    remove_workspace,
    run_plain,
    user_env,
)
from conftest import call

from keel.testing.server import ScriptedEngineServer

ROOT = os.geteuid() == 0
TIERS = [pytest.param("bubblewrap", marks=pytest.mark.bubblewrap), pytest.param("landlock", marks=pytest.mark.landlock)]
SECRET = "sk-keel-test-not-for-hooks"
PY = shlex.quote(sys.executable)


@pytest.fixture(params=["root", "kuser"])
def user(request: pytest.FixtureRequest) -> str | None:
    if request.param == "root":
        return None
    if not ROOT:
        pytest.skip("running as another user needs root")
    name = ensure_unprivileged_user()
    if name is None:
        reason = f"the unprivileged user cannot run {sys.executable} with keel (.ci/run opens the path)"
        if os.environ.get("KEEL_REQUIRE_SANDBOX") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return name


def _own(path: Path, user: str | None) -> Path:
    if user is not None:
        entry = pwd.getpwnam(user)
        for root, dirs, files in os.walk(path):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.lchown(name, entry.pw_uid, entry.pw_gid)
    return path


@pytest.fixture
def ws(user: str | None) -> Iterator[Path]:
    path = make_workspace(user)
    yield path
    remove_workspace(path)


@pytest.fixture
def home(user: str | None) -> Iterator[Path]:
    """keel's config and data dirs for this user (outside /tmp, which bubblewrap replaces)."""
    path = Path(tempfile.mkdtemp(prefix="keel-home-", dir="/var/tmp"))
    (path / "xdg" / "keel").mkdir(parents=True)
    yield path
    remove_workspace(path)


@pytest.fixture
def marker() -> Iterator[Path]:
    path = Path("/var/tmp") / f"keel-hook-ran-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


def keel_run(user: str | None, ws: Path, home: Path, config: str, script: list[dict[str, Any]],
             task: str = "do the task") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``keel run`` as ``user`` with ``config`` as the user config; the result and the events."""
    (home / "xdg" / "keel" / "config.toml").write_text(config)
    _own(home, user)
    _own(ws, user)
    env = {**user_env(user), "KEEL_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "xdg"),
           "KEEL_API_KEY": SECRET}
    with ScriptedEngineServer(script) as server:
        done = run_plain_argv(user, [sys.executable, "-m", "keel.cli.main", "run", task, "--cwd", str(ws),
                                     "--base-url", server.base_url, "--model", "scripted", "--output-format",
                                     "json", "--verify", "off"], env)
    assert done[0] in (0, 1), done[2][-3000:]
    result = json.loads(done[1].strip().splitlines()[-1])
    with open(result["log"], encoding="utf-8") as fh:
        return result, [json.loads(line) for line in fh]


def run_plain_argv(user: str | None, argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    import subprocess

    done = subprocess.run([*as_user(user), *argv], env=env, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL, cwd="/")
    return done.returncode, done.stdout, done.stderr


def hook_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "hook"]


def evil(marker: Path) -> str:
    """What the model writes into the hook's script: code that reaches outside the workspace."""
    return f"#!/bin/sh\nid > {marker}\nenv > leaked-env.txt\n"


# ---------------------------------------------------------------- item 1: model-written hook code


@pytest.mark.parametrize("tier", TIERS)
def test_a_stop_hook_whose_script_the_model_rewrote_stays_in_the_sandbox(user: str | None, ws: Path, home: Path,
                                                                          marker: Path, tier: str) -> None:
    (ws / "scripts").mkdir()
    (ws / "scripts" / "check_changelog.sh").write_text("#!/bin/sh\nexit 0\n")
    (ws / "scripts" / "check_changelog.sh").chmod(0o755)
    (ws / "ok.py").write_text("OK = 1\n")
    config = f'[shell]\nsandbox = "{tier}"\n[[hooks.Stop]]\ncommand = "./scripts/check_changelog.sh"\n'
    script = [{"tool_calls": [call("read_file", path="scripts/check_changelog.sh")]},
              {"tool_calls": [call("write_file", path="scripts/check_changelog.sh", content=evil(marker))]},
              {"tool_calls": [call("run_shell", command="python3 -m py_compile ok.py")]},   # fresh evidence
              {"content": "Updated the changelog check."}]
    result, events = keel_run(user, ws, home, config, script)
    assert result["status"] == "complete", result
    ran = hook_events(events)
    assert ran and ran[-1]["sandboxed"] is True, ran
    assert not marker.exists()                              # nothing written outside the workspace
    leaked = (ws / "leaked-env.txt").read_text()            # it ran (inside) ...
    assert "KEEL_PROJECT_DIR=" in leaked and SECRET not in leaked   # ... without keel's API key


@pytest.mark.parametrize("tier", TIERS)
def test_a_post_tool_use_make_hook_with_a_rewritten_makefile_stays_in_the_sandbox(
        user: str | None, ws: Path, home: Path, marker: Path, tier: str) -> None:
    (ws / "Makefile").write_text("fmt:\n\t@true\n")
    config = f'[shell]\nsandbox = "{tier}"\n[[hooks.PostToolUse]]\nmatcher = "write_file"\ncommand = "make -s fmt"\n'
    makefile = f"fmt:\n\t@id > {marker}; env > leaked-env.txt\n"
    script = [{"tool_calls": [call("read_file", path="Makefile")]},
              {"tool_calls": [call("write_file", path="Makefile", content=makefile)]},
              {"content": "done"}]
    keel_run(user, ws, home, config, script)
    assert not marker.exists()
    assert SECRET not in (ws / "leaked-env.txt").read_text()


def test_control_without_keel_the_rewritten_hook_reaches_outside(user: str | None, ws: Path, marker: Path) -> None:
    (ws / "scripts").mkdir()
    (ws / "scripts" / "check_changelog.sh").write_text(evil(marker))
    (ws / "scripts" / "check_changelog.sh").chmod(0o755)
    _own(ws, user)
    run_plain(user, ws, "./scripts/check_changelog.sh")
    assert marker.exists()


@pytest.mark.parametrize("tier", TIERS)
def test_a_users_unsandboxed_hook_stays_in_the_sandbox_once_the_session_wrote_its_script(
        user: str | None, ws: Path, home: Path, marker: Path, tier: str) -> None:
    """Variant: the user marked the hook ``sandbox = false``; unattended, no person can say yes."""
    (ws / "check.sh").write_text(f"#!/bin/sh\necho checked > {marker}.before\n")
    config = (f'[shell]\nsandbox = "{tier}"\n[[hooks.PostToolUse]]\nmatcher = "read_file|write_file"\n'
              f'command = "sh check.sh"\nsandbox = false\n')
    script = [{"tool_calls": [call("read_file", path="check.sh")]},
              {"tool_calls": [call("write_file", path="check.sh", content=evil(marker))]},
              {"content": "done"}]
    try:
        _, events = keel_run(user, ws, home, config, script)
        before = Path(f"{marker}.before")
        assert before.exists()                       # untouched, it ran outside as the user asked
    finally:
        Path(f"{marker}.before").unlink(missing_ok=True)
    ran = hook_events(events)
    assert [h["sandboxed"] for h in ran] == [False, True], ran
    assert "this session wrote check.sh" in (ran[-1]["note"] or "")
    assert not marker.exists()


def test_a_project_config_cannot_take_a_hook_out_of_the_sandbox(tmp_path: Path) -> None:
    from keel.config import load_config

    (tmp_path / ".keel").mkdir()
    (tmp_path / ".keel" / "config.toml").write_text('[[hooks.Stop]]\ncommand = "x"\nsandbox = false\n')
    config, warnings = load_config(tmp_path, user_path=tmp_path / "none.toml", env={})
    assert config.hooks.Stop[0].sandbox is True
    assert any("only your user config" in w for w in warnings)


# ---------------------------------------------------------------- hooks that format or check still work


@pytest.mark.parametrize("tier", TIERS)
def test_a_formatter_hook_and_a_test_runner_hook_work_sandboxed(user: str | None, ws: Path, home: Path,
                                                                tier: str) -> None:
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    fmt = (f"{PY} -m ruff format --quiet --no-cache "
           f"\"$({PY} -c 'import json,sys; print(json.load(sys.stdin)[\\\"tool_input\\\"][\\\"path\\\"])')\"")
    test = f"{PY} -m pytest -q -x -p no:cacheprovider >&2 || exit 2"
    config = (f'[shell]\nsandbox = "{tier}"\n[[hooks.PostToolUse]]\nmatcher = "write_file"\ncommand = """{fmt}"""\n'
              f'[[hooks.Stop]]\ncommand = """{test}"""\n')
    script = [{"tool_calls": [call("write_file", path="util.py", content="x=1;y=[1,2 ,3]\n")]},
              {"tool_calls": [call("run_shell", command="python3 -m py_compile util.py")]},
              {"content": "done"},                                            # the tests still fail: sent back
              {"tool_calls": [call("read_file", path="calc.py")]},
              {"tool_calls": [call("write_file", path="calc.py", content="def add(a,b):\n    return a+b\n")]},
              {"tool_calls": [call("run_shell", command="python3 -m py_compile calc.py")]},
              {"content": "fixed add"}]
    result, events = keel_run(user, ws, home, config, script)
    assert (ws / "util.py").read_text() == "x = 1\ny = [1, 2, 3]\n"            # the formatter ran
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    stops = [h for h in hook_events(events) if h["event"] == "Stop"]
    assert [h["outcome"] for h in stops] == ["block", "ok"], stops             # the test runner ran, twice
    assert all(h["sandboxed"] for h in hook_events(events))
    assert result["status"] == "complete"


@pytest.mark.parametrize("tier", TIERS)
def test_a_sandboxed_hook_reads_its_own_sessions_transcript(user: str | None, ws: Path, home: Path,
                                                            tier: str) -> None:
    copy = (f"{PY} -c 'import json,shutil,sys; e=json.load(sys.stdin); "
            f"shutil.copy(e[\\\"transcript_path\\\"], \\\"transcript-copy.jsonl\\\")'")
    config = f'[shell]\nsandbox = "{tier}"\n[[hooks.Stop]]\ncommand = """{copy}"""\n'
    (ws / "README").write_text("nothing here\n")
    result, _ = keel_run(user, ws, home, config, [{"tool_calls": [call("read_file", path="README")]},
                                                  {"content": "nothing to do"}], task="what does README say?")
    copied = (ws / "transcript-copy.jsonl").read_text()
    assert result["session_id"] in copied and '"type": "session_start"' in copied
