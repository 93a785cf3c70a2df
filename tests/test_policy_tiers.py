"""Items 3 and 4 of the tier model: what the OS tier changes in the shell policy and the file tools.

Every row is judged twice, without a confining tier (rlimits only) and with one (bubblewrap or
Landlock): running arbitrary code asks without one, workspace writes run unasked only with one,
and network, installs, paths outside the workspace and files that make other programs run
commands later ask or deny under both.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from keel.policy.approval import Approver
from keel.policy.shell.risk import classify_command


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("KEY\n")
    monkeypatch.setenv("HOME", str(home))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    for rel in ("src/a.py", "build/out.o", "f.py", "notes.txt", "tests/test_a.py", "app.js"):
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text("x\n")
    os.symlink(tmp_path, workspace / "outlink")
    return workspace


def both(command: str, ws: Path) -> tuple[str, str]:
    return (classify_command(command, ws, confined=False).decision,
            classify_command(command, ws, confined=True).decision)


# (command, without a confining tier, with one)
RUNNING_CODE = [
    ("python -c 'print(1)'", "ask", "allow"), ("python3 script.py --flag", "ask", "allow"),
    ("node app.js", "ask", "allow"), ("node -e 'console.log(1)'", "ask", "allow"),
    ("python - <<'EOF'\nprint(1)\nEOF", "ask", "allow"), ("python -m mypkg", "ask", "allow"),
    ("cargo run", "ask", "allow"), ("go run .", "ask", "allow"), ("python < f.py", "ask", "allow"),
    ("echo 'print(1)' | python", "ask", "ask"), ("perl -e 'print 1'", "ask", "ask"), ("bash x.sh", "ask", "ask"),
]
CHECKS = [
    "pytest -q", "python -m pytest -q", "python3 -m unittest", "npm test", "npm run lint", "ruff check .",
    "mypy src", "make test", "make", "go test ./...", "go vet ./...", "cargo test", "cargo build", "tsc --noEmit",
    "python tests/test_a.py", "python test_app.py", "node --test", "pyright",
]
WORKSPACE_WRITES = [
    "echo x >> notes.txt", "echo x > out.txt", "printf 'a\\n' > src/new.py", "mkdir build2", "mkdir -p a/b/c",
    "touch new.py", "cp f.py g.py", "cp -r src src2", "mv f.py g.py", "rm f.py", "rm -rf build", "rm -r build/out.o",
    "rm *.pyc", "sed -i 's/a/b/' src/a.py", "git add -A && git commit -m 'msg'", "git add f.py", "git commit -am x",
    "git checkout -b feature", "git checkout -- f.py", "git switch main", "git switch -c topic", "git stash",
    "git stash pop", "git restore --staged f.py", "git branch new", "git branch -d old", "git merge --no-ff topic",
    "git rebase main", "git rebase --continue", "cat f.py | tee copy.py", "cd src && touch b.py",
    "[[ -d build ]] || mkdir build", "git commit -qm msg", "git stash push -m wip",
    "git commit -m \"$(cat <<'EOF'\nfix: x\nEOF\n)\"", "find . -name '*.pyc' -delete", ": > notes.txt",
    # issue 33: everyday work the tier confines and the snapshot undoes
    "chmod +x f.py", "chmod -R u+w src", "ln -s f.py g.py", "ln -s src/a.py link.py", "tar czf out.tgz src",
    "zip -r out.zip src", "gzip notes.txt", "black src", "ruff format .", "ruff check --fix .", "cargo fmt",
    "go fmt ./...", "prettier --write src", "eslint --fix app.js", "make format", "npm run format",
]
STILL_ASK = [
    "git push", "git fetch", "git pull", "git clone https://example.com/x", "git remote add o https://x",
    "pip install requests", "npm install", "curl -o f https://example.com", "echo x > .envrc", "mkdir .claude",
    "touch .mcp.json", "echo '{}' > .vscode/tasks.json", "cp f.py .husky/pre-commit", "mkdir -p .devcontainer",
    "echo x > .keel/config.toml", "sed -i s/a/b/ .envrc", "mv f.py .claude/settings.json", "rm -r .git/objects",
    "git rebase -i main", "git rebase --exec make main", "git commit -S -m x", "git merge -s evil topic",
    "git commit --amen -m x", "git commit -m x --template=t", "mv $X g.py", "cp $(cat list) dst",
    "git -c core.x=y commit -m x", "touch \"$F\"", "for f in a b; do touch $f.txt; done", "echo x > ~+/f",
    "git config user.name bob", "git reset --hard", "git clean -fdx", "xargs rm < list", "tee .envrc",
    "git commit -F \"$F\"", "echo x > .git/HEAD", "chmod u+s f.py", "chmod 4755 f.py", "ln -s /etc/passwd p",
    "ln ../x hard", "chown me f.py", "tar xzf a.tgz", "unzip a.zip",
]
DENIED = [
    "echo x > ~/x", "touch /tmp/x", "echo x > .git/hooks/pre-commit", "cp f.py ../x", "rm -rf .", "rm -rf .git", "rm -r .*",
    "mv f.py outlink/f.py", "echo x >> ~/.bashrc", "mkdir /tmp/d", "sed -i s/a/b/ /etc/hosts",
]


@pytest.mark.parametrize(("command", "plain", "confined"), RUNNING_CODE)
def test_running_code_asks_without_a_confining_tier(ws: Path, command: str, plain: str, confined: str) -> None:
    assert both(command, ws) == (plain, confined)


@pytest.mark.parametrize("command", CHECKS)
def test_the_projects_checks_run_under_both_tiers(ws: Path, command: str) -> None:
    assert both(command, ws) == ("allow", "allow")


@pytest.mark.parametrize("command", WORKSPACE_WRITES)
def test_workspace_writes_run_unasked_only_under_a_confining_tier(ws: Path, command: str) -> None:
    # snapshot: as in a run, the workspace is snapshotted before the command (keel.trace.snapshot)
    assert (classify_command(command, ws, confined=False, snapshot=True).decision,
            classify_command(command, ws, confined=True, snapshot=True).decision) == ("ask", "allow")


def test_a_recursive_delete_no_snapshot_holds_asks(ws: Path) -> None:
    """Issue 21: deleting the workspace's own directories asks unless a snapshot holds them (the
    workspace is over the snapshot cap, or snapshots are off)."""
    for command in ("rm -rf build", "rm -r build/out.o"):
        verdict = classify_command(command, ws, confined=True, snapshot=False)
        assert verdict.decision == "ask" and "no snapshot holds" in verdict.reason
    assert classify_command("rm build/out.o", ws, confined=True, snapshot=False).decision == "allow"


@pytest.mark.parametrize("command", STILL_ASK)
def test_network_installs_and_runs_later_files_ask_under_both(ws: Path, command: str) -> None:
    assert both(command, ws) == ("ask", "ask")


@pytest.mark.parametrize("command", DENIED)
def test_writes_outside_or_into_hooks_are_denied_under_both(ws: Path, command: str) -> None:
    assert both(command, ws) == ("deny", "deny")


@pytest.mark.parametrize("path", [".envrc", ".mcp.json", ".claude/settings.json", ".vscode/tasks.json",
                                  ".husky/pre-commit", ".devcontainer/devcontainer.json", ".keel/config.toml",
                                  "sub/.envrc", ".pre-commit-config.yaml"])
@pytest.mark.parametrize("mode", ["unattended", "auto-edit"])
def test_file_tools_ask_before_writing_files_that_run_commands_later(ws: Path, path: str, mode: str) -> None:
    outcome = Approver(mode, workspace=ws).authorize_edit(path)  # type: ignore[arg-type]
    assert not outcome.allowed and outcome.decision in ("ask", "deny"), outcome
    assert Approver(mode, workspace=ws).authorize_edit("src/ok.py").allowed  # type: ignore[arg-type]


def test_unattended_approver_runs_workspace_writes_only_when_confined(ws: Path) -> None:
    command = "git add -A && git commit -qm msg && echo x >> notes.txt"
    assert not Approver("unattended", workspace=ws).authorize_shell(command).allowed
    assert Approver("unattended", workspace=ws, confined=True).authorize_shell(command).allowed
