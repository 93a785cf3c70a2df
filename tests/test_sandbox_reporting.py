"""The active sandbox tier is named wherever keel speaks of it: `keel policy` (which also applies
the configured rules, as run_shell does), session_start, and a headless run's one warning."""

from __future__ import annotations

import json
from pathlib import Path

from keel.agent import Agent
from keel.cli.policy import honest_reason
from keel.config import Config
from keel.policy.sandbox import detect_sandbox
from keel.testing import ScriptedModel


def write_config(directory: Path, text: str) -> None:
    (directory / ".keel").mkdir(parents=True, exist_ok=True)
    (directory / ".keel" / "config.toml").write_text(text)


def sandbox_off(keel_env: dict[str, str]) -> dict[str, str]:
    # shell.sandbox is ignored in a project file (it would loosen), so the user's config turns it off.
    user_config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text('[shell]\nsandbox = "off"\n')
    return keel_env


def test_keel_policy_applies_the_configured_rules(tmp_path: Path, run_keel) -> None:
    write_config(tmp_path, '[permissions]\ndeny = ["shell(git status)"]\n')
    verdict = json.loads(run_keel("policy", "git status", "--json", cwd=tmp_path).stdout)
    assert verdict["decision"] == "deny" and "shell(git status)" in verdict["reason"]
    other = run_keel("policy", "git status", "--json", "--cwd", str(tmp_path), cwd=Path("/"))
    assert json.loads(other.stdout)["decision"] == "deny"
    assert json.loads(run_keel("policy", "git log", "--json", cwd=tmp_path).stdout)["decision"] == "allow"


def test_keel_policy_names_the_tier(tmp_path: Path, run_keel, keel_env: dict[str, str]) -> None:
    on = run_keel("policy", "ls", cwd=tmp_path)
    assert on.code == 0 and on.stdout.splitlines()[1] == f"sandbox: {detect_sandbox().tier}" + (
        "" if detect_sandbox().confining else " — nothing confines what commands run beyond rlimits")
    off = run_keel("policy", "ls", "--json", cwd=tmp_path, env=sandbox_off(keel_env))
    verdict = json.loads(off.stdout)
    assert verdict["sandbox"] == "none (rlimits only)" and verdict["confining"] is False


def test_keel_policy_rejects_a_bad_rule(tmp_path: Path, run_keel) -> None:
    write_config(tmp_path, '[permissions]\ndeny = ["shell(git status:"]\n')
    bad = run_keel("policy", "ls", cwd=tmp_path)
    assert bad.code == 2 and "configuration error" in bad.stderr and "shell(git status:" in bad.stderr


def test_wording_never_claims_a_sandbox_that_is_not_there() -> None:
    claim = "runs project code (contained by the OS sandbox)"
    assert honest_reason(claim, "bubblewrap", True) == "runs project code (contained by bubblewrap)"
    none = honest_reason(claim, "none (rlimits only)", False)
    assert "contained by" not in none and "NOT contained" in none and "none (rlimits only)" in none
    assert honest_reason("git status only reads", "none (rlimits only)", False) == "git status only reads"


def test_headless_runs_warn_once_when_nothing_confines(tmp_path: Path, run_keel, keel_env: dict[str, str]) -> None:
    env = sandbox_off(keel_env)
    # a model name without a URL: the run stops at the engine, after the warning (nothing names no
    # engine at all, which would start the embedded default model)
    for fmt in ("json", "stream-json"):
        run = run_keel("run", "x", "--cwd", str(tmp_path), "--model", "m", "--output-format", fmt, env=env)
        assert run.stderr.count("no OS sandbox confines shell commands here (none (rlimits only))") == 1, run.stderr
    text = run_keel("run", "x", "--cwd", str(tmp_path), "--model", "m", env=env)
    assert "no OS sandbox confines" not in text.stderr


def test_session_start_names_the_tier(tmp_path: Path) -> None:
    events: list[dict] = []
    Agent(ScriptedModel([{"content": "nothing to do"}]), workspace=tmp_path, sinks=[events.append],
          log_path=False).run("say hi")
    start = events[0]
    assert start["type"] == "session_start"
    assert (start["sandbox"], start["confining"]) == (detect_sandbox().tier, detect_sandbox().confining)
    assert start["protection"].startswith(detect_sandbox().tier)
    off = Config.model_validate({"shell": {"sandbox": "off"}})
    events.clear()
    Agent(ScriptedModel([{"content": "nothing to do"}]), workspace=tmp_path, config=off, sinks=[events.append],
          log_path=False).run("say hi")
    assert (events[0]["sandbox"], events[0]["confining"]) == ("none (rlimits only)", False)


def test_keel_policy_judges_with_the_tier_as_run_shell_does(tmp_path: Path, run_keel,
                                                            keel_env: dict[str, str]) -> None:
    on = json.loads(run_keel("policy", "mkdir build", "--json", cwd=tmp_path).stdout)
    assert on["decision"] == ("allow" if detect_sandbox().confining else "ask")
    off = json.loads(run_keel("policy", "mkdir build", "--json", cwd=tmp_path, env=sandbox_off(keel_env)).stdout)
    assert off["decision"] == "ask" and off["confining"] is False


def test_the_user_config_can_force_a_tier_and_a_project_cannot(tmp_path: Path, run_keel,
                                                                 keel_env: dict[str, str]) -> None:
    """`[shell] sandbox = "landlock"` in the user's config takes that tier even where bubblewrap works
    (how the Landlock tier stays tested on a machine that has both); a project's file cannot pick it."""
    from keel.policy.landlock import probe

    if probe()[1] is not None:
        import pytest
        pytest.skip(f"Landlock unavailable: {probe()[1]}")
    user_config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text('[shell]\nsandbox = "landlock"\n')
    forced = json.loads(run_keel("policy", "ls", "--json", cwd=tmp_path, env=keel_env).stdout)
    assert forced["sandbox"].startswith("landlock") and forced["confining"] is True
    user_config.unlink()
    write_config(tmp_path, '[shell]\nsandbox = "landlock"\n')
    ignored = run_keel("policy", "ls", "--json", cwd=tmp_path, env=keel_env)
    assert json.loads(ignored.stdout)["sandbox"] == detect_sandbox().tier
