"""One door (issue 34): every process keel starts goes through keel.policy.runner, which returns a
structured result, and a run's report names each write to other programs' run-later config."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest
from conftest import call

from keel.agent import Agent
from keel.config import load_config
from keel.policy.runner import Job, run
from keel.policy.sandbox import SandboxPolicy
from keel.testing.server import ScriptedEngineServer

KEEL = Path(__file__).resolve().parent.parent / "keel"
# The modules that start processes themselves, each for a reason: the rest go through the runner.
STARTERS = {
    "keel/policy/process.py": "the one spawn: Popen for every job of keel.policy.runner",
    "keel/policy/landlock_exec.py": "the Landlock helper forks and execs the command it confines",
}
# Starts by a library, fed what the runner prepared, or keel's own workers (not the model's).
LIBRARY_STARTS = {
    "keel/ext/mcp.py": "stdio_client",                 # the MCP SDK starts keel.policy.runner.prepare's argv
    "keel/eval/suite.py": "ProcessPoolExecutor",       # the eval's own worker pool, running keel's Python
}
_SPAWNING = {("subprocess", n) for n in ("Popen", "run", "call", "check_call", "check_output", "getoutput",
                                         "getstatusoutput")}
_SPAWNING |= {("os", n) for n in ("fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "execv",
                                  "execve", "execvp", "execvpe", "execl", "execlp", "execle", "execlpe", "spawnv",
                                  "spawnve", "spawnvp", "spawnl")}
_SPAWNING |= {("asyncio", "create_subprocess_exec"), ("asyncio", "create_subprocess_shell"), ("pty", "spawn"),
              ("pty", "fork")}


def _starts(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                (node.value.id, node.attr) in _SPAWNING:
            found.append(f"{node.value.id}.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "pty") and \
                any((node.module, a.name) in _SPAWNING for a in node.names):
            found.append(f"from {node.module} import …")
    return found


def test_at_most_two_modules_start_processes_the_rest_go_through_the_runner() -> None:
    starters = {str(p.relative_to(KEEL.parent)): _starts(p) for p in sorted(KEEL.rglob("*.py"))}
    assert {p for p, calls in starters.items() if calls} == set(STARTERS), \
        {p: c for p, c in starters.items() if c and p not in STARTERS}
    for path, name in LIBRARY_STARTS.items():
        assert name in (KEEL.parent / path).read_text(encoding="utf-8"), path


def test_the_result_is_structured_exit_signal_output_apart_and_timing(tmp_path: Path) -> None:
    done = run(Job(tmp_path, argv=[sys.executable, "-c", "import sys; d = sys.stdin.read(); print(len(d)); "
                                                         "print('warn', file=sys.stderr); sys.exit(3)"],
                   stdin=b"x" * 300_000, stderr_apart=True, policy=SandboxPolicy(enabled=False)))
    assert (done.exit_code, done.output, done.stderr, done.timed_out, done.stopped) == (3, "300000\n", "warn\n",
                                                                                       False, None)
    assert done.sandbox == "rlimits" and done.elapsed_s > 0 and not done.ok
    killed = run(Job(tmp_path, command="kill -9 $$", policy=SandboxPolicy(enabled=False)))
    assert killed.exit_code is None and killed.signal == 9
    slow = run(Job(tmp_path, command="sleep 30", timeout_s=0.5, policy=SandboxPolicy(enabled=False)))
    assert slow.timed_out and slow.exit_code is None and slow.elapsed_s < 5


def test_the_environment_is_scrubbed_and_the_jobs_own_variables_added(tmp_path: Path) -> None:
    env = {**os.environ, "KEEL_API_KEY": "sk-secret", "GITHUB_TOKEN": "ghp_x"}
    done = run(Job(tmp_path, command="env", env=env, extra_env={"KEEL_PROJECT_DIR": "p"},
                   policy=SandboxPolicy(enabled=False)))
    assert "sk-secret" not in done.output and "ghp_x" not in done.output and "KEEL_PROJECT_DIR=p" in done.output
    own = run(Job(tmp_path, command="env", env=env, scrub=False, limits=False, sandbox=False))
    assert "KEEL_API_KEY=sk-secret" in own.output                       # keel's own child, as given


@pytest.mark.parametrize("answer", [True, False])
def test_a_person_decides_whether_a_commands_run_later_config_stays(tmp_path: Path, answer: bool) -> None:
    asked: list[str] = []
    done = run(Job(tmp_path, command="echo 'layout python' > .envrc && mkdir -p .vscode && echo '{}' > "
                                     ".vscode/tasks.json", policy=SandboxPolicy(enabled=False),
                   keep_later=lambda path: asked.append(path) or answer))
    assert sorted(asked) == [".envrc", ".vscode"]
    assert (tmp_path / ".envrc").exists() is answer and (tmp_path / ".vscode" / "tasks.json").exists() is answer
    assert (sorted(done.kept), sorted(done.refused)) == ((sorted(asked), []) if answer else ([], sorted(asked)))


def test_the_runs_report_names_each_write_to_run_later_config(calc_repo: Path, tmp_path: Path) -> None:
    gen = "open('.env' + 'rc', 'w').write('export X=1\\n')\nopen('.pre-commit-config.yaml', 'w').write('repos: []\\n')\n"
    script = [{"tool_calls": [call("write_file", path="gen.py", content=gen)]},     # the policy sees no name
              {"tool_calls": [call("run_shell", command="python3 gen.py")]},
              {"content": "set up direnv and pre-commit"}]
    user = tmp_path / "user.toml"
    user.write_text("")
    with ScriptedEngineServer(script) as server:
        config, _ = load_config(calc_repo, user_path=user, env={},
                                flags={"engine": {"base_url": server.base_url, "model": "scripted"}})
        result = Agent(workspace=calc_repo, config=config, log_path=tmp_path / "log.jsonl").run("set up direnv")
    assert sorted(e["path"] for e in result.changes["runs_later"]) == [".envrc", ".pre-commit-config.yaml"]
    assert all(e["kept"] is False for e in result.changes["runs_later"])
    assert not (calc_repo / ".envrc").exists()


@pytest.mark.parametrize("confine", [True, False])
def test_an_mcp_server_starts_through_the_runner_unless_the_user_says_otherwise(
        calc_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, confine: bool) -> None:
    pytest.importorskip("mcp", reason="the MCP SDK is an optional extra: pip install 'keel[mcp]'")
    import json

    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "keel-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("KEEL_API_KEY", "sk-not-for-servers")
    fixture = Path(__file__).parent / "fixtures" / "mcp_server.py"
    spec = {"command": sys.executable, "args": [str(fixture), "--name", "fx"], "env": {"FIXTURE_TOKEN": "t0k"}}
    if not confine:
        spec["confine"] = False
    (tmp_path / "xdg" / "keel").mkdir(parents=True)
    (tmp_path / "xdg" / "keel" / "mcp.json").write_text(json.dumps({"mcpServers": {"fx": spec}}))
    user = tmp_path / "user.toml"
    user.write_text('[permissions]\nallow = ["mcp__fx"]\n')
    script = [{"tool_calls": [call("mcp__fx__bounds"), call("mcp__fx__whoami")]}, {"content": "seen"}]
    with ScriptedEngineServer(script, api_key="sk-not-for-servers") as server:
        config, _ = load_config(calc_repo, user_path=user, env={},
                                flags={"engine": {"base_url": server.base_url, "model": "scripted"},
                                       "verify": {"mode": "off"}, "extensions": {"mcp_startup_timeout_s": 120}})
        agent = Agent(workspace=calc_repo, config=config, log_path=tmp_path / "log.jsonl")
        try:
            agent.run("ask the server")
        finally:
            agent.close()
        seen = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert seen[1] == f"cwd={calc_repo} token=t0k"             # its own env and cwd, as configured
    # through the runner: a command's limits; as configured: the SDK's own start, no limits. Neither
    # hands the server keel's API key.
    assert seen[0] == (f"fsize={1024**3} key=" if confine else "fsize=unlimited key=")
