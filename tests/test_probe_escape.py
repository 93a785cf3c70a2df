"""Check detection never imports workspace code outside the sandbox (issue 34, item 2): ``keel checks``
run for real in a workspace that plants a module shadowing the standard library, as the test runner
(root) and as ``kuser``, on each tier. The interpreter probe (does python3 have pytest?) runs in
isolated mode in an empty directory through the runner; the control shows the probe as it was run
before (``python3 -c ...`` in the workspace) runs the planted module. The interpreter is the
system's /usr/bin/python3, whose ``importlib`` is not loaded at start (pyenv's is), so the shadowing
takes effect there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bwrap_runner import (
    as_user,
    ensure_unprivileged_user,
    make_workspace,
    remove_workspace,
    run_plain,
    user_env,
)

ROOT = os.geteuid() == 0
SYSTEM_PYTHON = "/usr/bin/python3"
TIERS = [pytest.param("bubblewrap", marks=pytest.mark.bubblewrap), pytest.param("landlock", marks=pytest.mark.landlock)]
OLD_PROBE = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)"

pytestmark = pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason=f"needs {SYSTEM_PYTHON}")


@pytest.fixture(params=["root", "kuser"])
def user(request: pytest.FixtureRequest) -> str | None:
    if request.param == "root":
        return None
    if not ROOT:
        pytest.skip("running as another user needs root")
    name = ensure_unprivileged_user()
    if name is None:
        pytest.fail(f"the unprivileged user cannot run {sys.executable} with keel") if os.environ.get(
            "KEEL_REQUIRE_SANDBOX") == "1" else pytest.skip("the unprivileged user cannot run keel here")
    return name


@pytest.fixture
def marker() -> Iterator[Path]:
    path = Path("/var/tmp") / f"keel-probe-ran-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture
def ws(user: str | None, marker: Path) -> Iterator[Path]:
    """A Python project with tests that plants ``importlib.py`` (run by any ``import importlib.x`` that
    searches the current directory) and ``pytest.py`` (which would make pytest look installed)."""
    path = make_workspace(user)
    (path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (path / "tests").mkdir()
    (path / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    (path / "importlib.py").write_text(f"open({str(marker)!r}, 'w').write('planted module ran')\n")
    (path / "pytest.py").write_text("# not pytest\n")
    if user is not None:
        subprocess.run(["chown", "-R", user, str(path)], check=True)
    yield path
    remove_workspace(path)


def keel_checks(user: str | None, ws: Path, tier: str, cwd: Path | None = None) -> dict[str, object]:
    """``keel checks --json`` started in the workspace (or in ``cwd``, with ``--cwd`` naming it), the way
    a person starts it there."""
    home = Path(tempfile.mkdtemp(prefix="keel-home-", dir="/var/tmp"))
    try:
        (home / "keel").mkdir()
        (home / "keel" / "config.toml").write_text(f'[shell]\nsandbox = "{tier}"\n')
        if user is not None:
            subprocess.run(["chown", "-R", user, str(home)], check=True)
        # PATH: python3 is the system's, the interpreter the probe is asked about
        env = {**user_env(user), "XDG_CONFIG_HOME": str(home), "KEEL_HOME": str(home / "data"), "PATH": "/usr/bin:/bin"}
        done = subprocess.run([*as_user(user), sys.executable, "-m", "keel.cli.main", "checks", "--json", "--cwd",
                               str(ws)], cwd=cwd or ws, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)
    finally:
        remove_workspace(home)


def _pytest_entry(plan: dict[str, object]) -> tuple[str, str]:
    for key in ("checks", "skipped"):
        for entry in plan[key]:  # type: ignore[attr-defined]
            if "pytest" in entry["command"]:
                return key, str(entry.get("reason") or entry.get("note"))
    raise AssertionError(plan)


@pytest.mark.parametrize("tier", TIERS)
def test_detection_runs_no_planted_module_and_is_not_fooled_by_one(user: str | None, ws: Path, marker: Path,
                                                                    tier: str) -> None:
    plan = keel_checks(user, ws, tier)
    assert not marker.exists()
    where, why = _pytest_entry(plan)
    assert where == "skipped" and "pytest is not installed" in why, plan     # the planted pytest.py fooled nobody


@pytest.mark.parametrize("tier", TIERS)
def test_started_from_a_folder_of_the_workspace_that_plants_it(user: str | None, ws: Path, marker: Path,
                                                               tier: str) -> None:
    """Variant: the planted module is in the folder keel is started from (``cd tests; keel checks
    --cwd ..``), not at the workspace's top."""
    (ws / "importlib.py").rename(ws / "tests" / "importlib.py")
    keel_checks(user, ws, tier, cwd=ws / "tests")
    assert not marker.exists()


def test_control_the_old_probe_in_the_workspace_runs_the_planted_module(user: str | None, ws: Path,
                                                                          marker: Path) -> None:
    done = run_plain(user, ws, f"{SYSTEM_PYTHON} -c '{OLD_PROBE}' pytest; echo exit=$?")
    assert marker.exists(), done.stdout + done.stderr
