"""Shared fixtures: a small buggy project in a temp git repo, and a way to run the real `keel` CLI
against a scripted OpenAI-compatible engine over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from keel.agent import Agent
from keel.config import Config
from keel.testing import ScriptedEngineServer

CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"

# Fixture projects (eval cases, MCP servers) hold their own tests, which are data here, not tests of keel.
collect_ignore_glob = ["fixtures/*"]


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True,
                   capture_output=True)


def make_repo(root: Path, files: dict[str, str]) -> Path:
    """A git repository at ``root`` holding ``files`` (paths may have folders), one commit."""
    root.mkdir()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text(CALC)
    (repo / "test_calc.py").write_text(TEST_CALC)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    return repo


@dataclass
class KeelRun:
    code: int
    stdout: str
    stderr: str
    duration_s: float
    ended: float = 0.0     # wall clock (time.time()) when the process had exited

    @property
    def result(self) -> dict[str, Any]:
        return json.loads(self.stdout.strip().splitlines()[-1])

    def events(self) -> list[dict[str, Any]]:
        with open(self.result["log"], encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]


@pytest.fixture
def keel_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KEEL_", "OPENAI_"))}
    env["KEEL_HOME"] = str(tmp_path / "keel-home")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    # A run that names no engine starts the embedded default model, fetched once from the Hub or PyPI:
    # in a test that must fail at once, never download 1 GB (no test reaches beyond loopback).
    env.update(HF_HUB_OFFLINE="1", PIP_NO_INDEX="1")
    return env


def add_user_config(env: dict[str, str], text: str) -> Path:
    """Append ``text`` to the user config a keel started with ``env`` reads (``[assists] variety = true``
    for a test of an assist on the full profile, where it is off by default)."""
    path = Path(env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")
    return path


@pytest.fixture
def run_keel(keel_env: dict[str, str]):
    import time

    def _run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
             timeout: float = 60) -> KeelRun:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "keel.cli.main", *args], cwd=cwd, env=env or keel_env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return KeelRun(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started, time.time())

    return _run


def smoke_model() -> Path:
    """The small real GGUF the local-engine tests run (KEEL_SMOKE_MODEL, which .ci/run sets from
    scripts/fetch_test_model.py); they skip and say why without it or without llama-cpp-python."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        pytest.skip("llama-cpp-python is not installed (pip install 'keel[local]')")
    value = os.environ.get("KEEL_SMOKE_MODEL")
    if not value:
        pytest.skip("KEEL_SMOKE_MODEL is not set (python scripts/fetch_test_model.py prints the path to use)")
    if not Path(value).is_file():
        pytest.skip(f"KEEL_SMOKE_MODEL={value} does not exist")
    return Path(value)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def run_small(ws: Path, task: str, script: list[dict[str, Any]], *, max_steps: int | None = None,
              **assists: bool) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    """keel's library on ``ws`` with the small profile against the scripted engine, whose ``script`` also
    answers change_file's editor requests in order: so ``candidates`` is off unless named (one editor
    reply per request); ``assists`` switch the others. (result, the session's events, the requests.)"""
    log = ws.parent / "session.jsonl"
    with ScriptedEngineServer(script) as server:
        cfg = Config()
        cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", "small"
        if max_steps is not None:
            cfg.limits.max_steps = max_steps
        for name, on in {"candidates": False, **assists}.items():
            setattr(cfg.assists, name, on)
        result = Agent(workspace=ws, config=cfg, log_path=log).run(task)
        requests = server.requests
    return result, [json.loads(line) for line in log.read_text().splitlines()], requests


def assert_tool_messages_answer_calls(request: dict[str, Any]) -> None:
    """Every assistant tool_call is answered by exactly one tool message right after it, in order."""
    msgs = request["messages"]
    i = 0
    while i < len(msgs):
        m = msgs[i]
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            answers = [x.get("tool_call_id") for x in msgs[i + 1:i + 1 + len(ids)]]
            assert answers == ids, f"message {i}: calls {ids} answered by {answers}"
            assert all(x["role"] == "tool" for x in msgs[i + 1:i + 1 + len(ids)])
            i += 1 + len(ids)
        else:
            assert m["role"] != "tool", f"message {i}: a tool message that answers no call"
            i += 1


# ---------------------------------------------------------------- OS sandbox tiers
# Tests marked ``bubblewrap`` need a working bwrap, which a pip install cannot bring: they skip with
# the reason where it is missing or cannot start. CI (.ci/run) installs it and sets
# KEEL_REQUIRE_SANDBOX=1, which turns those skips into failures, so the sandbox is still proven
# there. Tests marked ``landlock`` skip only where the kernel lacks Landlock.

REQUIRE_SANDBOX_ENV = "KEEL_REQUIRE_SANDBOX"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "bubblewrap: needs a working bubblewrap (skipped without it, "
                                       "failed instead when KEEL_REQUIRE_SANDBOX=1)")
    config.addinivalue_line("markers", "landlock: needs a kernel with Landlock (skipped without it)")
    config.addinivalue_line("markers", "real_engine: runs a real GGUF model in process (opt-in: pytest -m "
                                       "real_engine with KEEL_TEST_MODEL=/path/model.gguf; skipped without it)")
    activate_this_python()


def activate_this_python() -> None:
    """Put the bin directory of the Python running the tests first on PATH, as activating its
    virtualenv would: the test projects' checks (python3 -m pytest, ruff) then run with the tools
    installed for the tests, also when the venv is used by its path (`venv/bin/python -m pytest`)
    and a system python3 without pytest comes first on PATH."""
    own = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if own not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([own, path]) if path else own


def tier_missing(tier: str) -> str | None:
    """Why the OS sandbox ``tier`` cannot run here, or None when it can."""
    from keel.policy.sandbox import detect_sandbox

    info = detect_sandbox(tier)
    return None if info.kind == tier else info.detail


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("bubblewrap") and (why := tier_missing("bubblewrap")):
        if os.environ.get(REQUIRE_SANDBOX_ENV) == "1":
            pytest.fail(f"{why} ({REQUIRE_SANDBOX_ENV}=1 requires it)", pytrace=False)
        pytest.skip(why)
    if item.get_closest_marker("landlock") and (why := tier_missing("landlock")):
        pytest.skip(why)


def path_without(program: str, shadow: Path, path: str | None = None) -> str:
    """A PATH that finds everything ``path`` (default: $PATH) finds except ``program``: each
    directory holding it is replaced by a copy of itself, made of symlinks, without it."""
    dirs = []
    for i, directory in enumerate((path if path is not None else os.environ.get("PATH", "")).split(os.pathsep)):
        if not os.path.exists(os.path.join(directory, program)):
            dirs.append(directory)
            continue
        copy = shadow / f"bin{i}"
        copy.mkdir(parents=True, exist_ok=True)
        for name in os.listdir(directory):
            if name != program and not (copy / name).exists():
                (copy / name).symlink_to(os.path.join(directory, name))
        dirs.append(str(copy))
    return os.pathsep.join(dirs)



def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path -> text) under ``root``, creating folders; returns ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def fake_which(*installed: str):
    """A ``which`` for check detection that finds exactly ``installed``."""
    return lambda name: f"/fake/bin/{name}" if name in installed else None


def module_probe_yes(_interp: str, _module: str) -> bool:
    return True
