"""The Landlock rules as data (no kernel needed): what is granted, and what never is."""

from __future__ import annotations

from pathlib import Path

from keel.policy import landlock, seccomp


def test_plan_grants_the_workspace_and_temp_dir_and_never_a_home(tmp_path: Path) -> None:
    home, ws, tmp, tool = tmp_path / "home", tmp_path / "ws", tmp_path / "t", tmp_path / "home" / ".local" / "bin"
    for d in (ws, tmp, tool, home / ".config" / "git", home / ".cargo" / "bin"):
        d.mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n")
    env = {"HOME": str(home), "PATH": f"{tool}:{tmp_path}:/usr/bin"}
    plan = landlock.plan(str(ws), str(tmp), env, network=False, protected=[str(home / ".config" / "keel")])
    assert plan.read_write[:2] == (str(ws), str(tmp)) and set(plan.read_write[2:]) <= {"/dev/shm"}
    assert str(tool) in plan.read_exec and "/usr" in plan.read_exec
    assert str(tmp_path) not in plan.read_exec            # on PATH, but it contains HOME
    assert str(home) not in plan.read_exec
    assert {str(home / ".gitconfig"), str(home / ".config" / "git")} <= set(plan.read_exec)
    assert str(home / ".cargo" / "bin") in plan.read_exec
    assert str(home / ".cargo") not in plan.read_exec    # only its bin/registry/git, never credentials
    assert "/proc" not in plan.read_exec and "/proc/cpuinfo" in plan.read_exec
    assert "/dev/null" in plan.devices and not plan.network
    assert landlock.LandlockPlan.from_json(plan.to_json()) == plan


def test_a_grant_that_would_contain_protected_data_is_dropped(tmp_path: Path) -> None:
    data = tmp_path / "opt-keel" / "data"
    data.mkdir(parents=True)
    env = {"HOME": str(tmp_path / "h"), "PATH": str(tmp_path / "opt-keel")}
    plan = landlock.plan(str(tmp_path / "ws"), str(tmp_path / "t"), env, network=True, protected=[str(data)])
    assert str(tmp_path / "opt-keel") not in plan.read_exec and plan.network


def test_described_honestly_by_abi() -> None:
    old = landlock.describe(3)
    assert old.startswith("landlock (ABI 3: fs): ")
    if seccomp.supported():      # the seccomp filter refuses every non-unix socket on any ABI
        assert "no sockets but unix ones" in old and "MPTCP" in landlock.describe(6)
    else:
        assert "network NOT confined" in old and "UDP NOT confined" in landlock.describe(6)
    new = landlock.describe(6)
    assert new.startswith("landlock (ABI 6: fs+net): ")
    # It says what it cannot stop, in a few words.
    assert "cannot stop: connecting to unix socket files, seeing other processes' pids" in new
    assert landlock.fs_rights(1) == (1 << 13) - 1 and landlock.fs_rights(3) & landlock.TRUNCATE
    assert not landlock.fs_rights(4) & landlock.IOCTL_DEV and landlock.fs_rights(5) & landlock.IOCTL_DEV
