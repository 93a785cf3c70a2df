"""The README's first command: install keel with its embedded engine and run a task on a shipped example.

What can be held here without a model: the command is one line that installs keel[local] and runs
`keel run` on an example that exists; docs/local.md shows the same line; the example's failing test
fails as shipped (the check keel plans for it is what fails), and the one-line fix makes it pass.
The run itself on the 1.5B model is measured, and its time stated, in the README."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

from conftest import module_probe_yes

from keel.verify.detect import detect_checks

ROOT = Path(__file__).resolve().parent.parent
FIRST_BLOCK = re.compile(r"## Set-up\n.*?```bash\n(.*?)```", re.DOTALL)


def first_command() -> str:
    found = FIRST_BLOCK.search((ROOT / "README.md").read_text())
    assert found, "README.md has no ```bash block under ## Set-up"
    lines = found.group(1).strip().splitlines()
    assert len(lines) == 1, f"the first set-up block is one command line, not {lines}"
    return lines[0]


def example_dir() -> Path:
    words = shlex.split(first_command())
    return ROOT / words[words.index("--cwd") + 1]


def test_the_first_command_installs_the_embedded_engine_and_runs_a_task_on_a_shipped_example() -> None:
    install, _, run = first_command().partition(" && ")
    assert install == "python -m pip install -e '.[local]'"
    words = shlex.split(run)
    assert words[:2] == ["keel", "run"] and words[2].strip() and words[3:5] == ["--cwd", words[4]], words
    assert words[4].startswith("examples/") and example_dir().is_dir()
    assert "--base-url" not in words and not (example_dir() / ".git").exists()   # no server, keel's own clone


def test_the_docs_show_the_same_command_line() -> None:
    assert first_command() in (ROOT / "docs" / "local.md").read_text().splitlines()
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"[Mm]easured .* on 2 cores", readme), "the README states how long the run took"


def shipped_copy(into: Path) -> Path:
    """The example as committed: the README's own command fixes the one in the checkout, and a
    `git checkout examples/` may not have come yet (a checkout without git: the files as they are)."""
    work = shutil.copytree(example_dir(), into)
    for path in work.iterdir():
        rel = (example_dir() / path.name).relative_to(ROOT).as_posix()
        shown = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True)
        if shown.returncode == 0:
            path.write_bytes(shown.stdout)
    return work


def test_the_examples_failing_test_fails_as_shipped_and_passes_after_the_fix(tmp_path: Path) -> None:
    work = shipped_copy(tmp_path / "example")
    plan = detect_checks(work, has_module=module_probe_yes)
    [check] = [c for c in plan.checks if c.category == "test"]
    before = subprocess.run(check.command, shell=True, cwd=work, capture_output=True, text=True, timeout=60)
    assert before.returncode != 0 and "FAILED" in before.stderr, before.stderr
    source = work / "temps.py"
    fixed = source.read_text().replace("* 9 / 5 - 32", "* 9 / 5 + 32")
    assert fixed != source.read_text()
    source.write_text(fixed)
    after = subprocess.run(check.command, shell=True, cwd=work, capture_output=True, text=True, timeout=60)
    assert after.returncode == 0, after.stderr
