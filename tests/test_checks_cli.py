"""`keel checks` end to end: the real CLI in a subprocess, on tiny projects written to tmp dirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PASSING_TEST = "from app import answer\nassert answer() == 42\nprint('OK')\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "app.py").write_text("def answer():\n    return 42\n")
    (root / "test_app.py").write_text(PASSING_TEST)
    return root


def keel_checks(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "keel.cli.main", "checks", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_text_lists_checks_with_reasons(project: Path, keel_env: dict[str, str]) -> None:
    (project / "package.json").write_text(json.dumps({"scripts": {"test": "node --test"}}))
    (project / "go.mod").write_text("module x\n")
    (project / ".github" / "workflows").mkdir(parents=True)
    (project / ".github" / "workflows" / "ci.yml").write_text("jobs:\n  t:\n    steps:\n      - run: pytest -q\n")
    out = keel_checks(keel_env, "--cwd", str(project), "--task", "fix it so that `python test_app.py` prints OK")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"keel checks · {project.resolve()}"
    assert any(line.startswith("[test] npm test — package.json has a \"test\" script") for line in lines)
    assert any(line.startswith("[acceptance] python test_app.py — the task names it") and "'OK'" in line
               for line in lines)
    # The inferred `python3 test_app.py` is the same check as the task's: planned once.
    assert not any(line.startswith("[test] python3 test_app.py") for line in lines)
    if "skipped:" in lines:          # go is not installed on most machines running these tests
        assert any("go.mod exists" in line for line in lines[lines.index("skipped:"):])
    assert "hints:" in lines
    assert any("ci.yml runs `pytest -q` in CI" in line for line in lines)


def test_json_prints_the_plan(project: Path, keel_env: dict[str, str]) -> None:
    out = keel_checks(keel_env, "--cwd", str(project), "--json", "--accept", "python3 -c 'print(1)'")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert set(plan) == {"checks", "skipped", "hints"}
    assert [(c["category"], c["command"], c["source"]) for c in plan["checks"]] == [
        ("test", "python3 test_app.py", "inferred"), ("acceptance", "python3 -c 'print(1)'", "accept")]
    assert plan["checks"][0]["protects"] == ["test_app.py"]
    assert plan["checks"][0]["expect_output"] is None


def test_run_passes_on_a_passing_project(project: Path, keel_env: dict[str, str]) -> None:
    out = keel_checks(keel_env, "--cwd", str(project), "--run", "--task", "so that `python3 test_app.py` prints OK")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS [acceptance] python3 test_app.py (" in out.stdout
    assert out.stdout.rstrip().endswith("1/1 checks passed")


def test_run_fails_on_a_failing_project(project: Path, keel_env: dict[str, str]) -> None:
    (project / "app.py").write_text("def answer():\n    return 41\n")
    out = keel_checks(keel_env, "--cwd", str(project), "--run")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAIL [test] python3 test_app.py (exit 1, " in out.stdout
    assert "AssertionError" in out.stdout            # the tail of the failing output is shown
    assert out.stdout.rstrip().endswith("0/1 checks passed")


def test_run_fails_when_the_expected_output_is_missing(project: Path, keel_env: dict[str, str]) -> None:
    (project / "test_app.py").write_text("print('fine')\n")
    out = keel_checks(keel_env, "--cwd", str(project), "--run", "--json",
                      "--task", "so that `python3 test_app.py` prints OK")
    assert out.returncode == 1, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["passed"] is False
    assert result["results"] == [{"category": "acceptance", "command": "python3 test_app.py", "passed": False,
                                  "exit_code": 0, "duration_s": result["results"][0]["duration_s"],
                                  "note": "output does not contain 'OK'"}]


def test_empty_project_says_so(tmp_path: Path, keel_env: dict[str, str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = keel_checks(keel_env, "--cwd", str(empty), "--run")
    assert out.returncode == 0, out.stderr
    assert "no checks found" in out.stdout and "no checks to run" in out.stdout


def test_usage_errors_exit_2(tmp_path: Path, keel_env: dict[str, str]) -> None:
    out = keel_checks(keel_env, "--cwd", str(tmp_path / "missing"))
    assert out.returncode == 2 and "no such directory" in out.stderr
    out = keel_checks(keel_env, "--cwd", "/etc")
    assert out.returncode == 2 and "system directory" in out.stderr
    out = keel_checks(keel_env, "--frobnicate")
    assert out.returncode == 2 and "unrecognized arguments" in out.stderr


def test_run_authorizes_like_the_gate(project: Path, keel_env: dict[str, str]) -> None:
    """A virtualenv interpreter (a program given by path: ask-class) runs as it would in the gate;
    a deny-class command is refused and counts as a failure, never as a pass."""
    (project / ".venv" / "bin").mkdir(parents=True)
    # the real interpreter, not a venv's link to it: a venv under /tmp is invisible in bubblewrap's private /tmp
    (project / ".venv" / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    out = keel_checks(keel_env, "--cwd", str(project), "--run")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS [test] .venv/bin/python test_app.py (" in out.stdout
    out = keel_checks(keel_env, "--cwd", str(project), "--run", "--accept", "curl -s http://127.0.0.1:9 | sh")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAIL [acceptance] curl -s http://127.0.0.1:9 | sh (not run, " in out.stdout


def test_config_pins_the_plan_switches_categories_and_adds_acceptance(project: Path,
                                                                       keel_env: dict[str, str]) -> None:
    (project / ".keel").mkdir()
    (project / ".keel" / "config.toml").write_text(
        '[verify]\nstatic = false\naccept = ["python3 -c \'print(2)\'"]\n'
        '[[verify.plan]]\ncategory = "static"\ncommand = "python3 -m py_compile app.py"\n'
        '[[verify.plan]]\ncategory = "test"\ncommand = "python3 test_app.py"\n')
    out = keel_checks(keel_env, "--cwd", str(project), "--json", "--accept", "python3 -c 'print(3)'")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert [(c["category"], c["command"], c["source"]) for c in plan["checks"]] == [
        ("test", "python3 test_app.py", "config"), ("acceptance", "python3 -c 'print(2)'", "accept"),
        ("acceptance", "python3 -c 'print(3)'", "accept")]
    assert plan["skipped"] == [{"category": "static", "command": "python3 -m py_compile app.py",
                                "note": "the static category is turned off in config"}]
    (project / ".keel" / "config.toml").write_text('[[verify.plan]]\ncategory = "unit"\ncommand = "x"\n')
    out = keel_checks(keel_env, "--cwd", str(project))
    assert out.returncode == 2 and "configuration error" in out.stderr and "verify.plan" in out.stderr


def test_a_blank_acceptance_command_is_an_error_not_a_silent_skip(project: Path, keel_env: dict[str, str]) -> None:
    """`--accept "$CMD"` with CMD unset must not give a run verified without the gate the user asked for."""
    out = keel_checks(keel_env, "--cwd", str(project), "--accept", "  ")
    assert out.returncode == 2 and "acceptance command" in out.stderr and "empty" in out.stderr
    (project / ".keel").mkdir()
    (project / ".keel" / "config.toml").write_text('[verify]\naccept = [""]\n')
    out = keel_checks(keel_env, "--cwd", str(project))
    assert out.returncode == 2 and "verify.accept.0" in out.stderr
