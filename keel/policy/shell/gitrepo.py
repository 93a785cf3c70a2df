"""Programs a repository's own configuration makes a reading git command run.

A workspace can arrive with a ``.git/config`` that sets ``diff.external``, a diff driver's
``textconv`` or ``command``, ``core.fsmonitor`` or a GPG program; then ``git diff``, ``git log -p``,
``git show``, ``git blame`` or ``git status`` run that program although they only read. The
policy reads the configuration of the repository a command works in (never by running git) with
the strict reader of keel.policy.gitconfig and asks when such a key is set for the subcommand at
hand — or when it cannot tell: an ``include``, a file the reader does not understand, a working
directory only known at run time.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from keel.policy.gitconfig import entries

# What each reading subcommand may run, by configuration key (lower-cased, subsections as *).
_EXTERNAL = ("diff.external", "diff.*.command")
_TEXTCONV = ("diff.*.textconv",)
_FSMONITOR = ("core.fsmonitor",)
_GPG = ("gpg.program", "gpg.*.program")
# git runs an external diff for `git diff` only (log and show need --ext-diff, which asks); textconv
# for diff, for log/show when they show patches, and for blame (git-config(1), gitattributes(5)).
RUNS: dict[str, tuple[str, ...]] = {
    "diff": _EXTERNAL + _TEXTCONV + _FSMONITOR, "stash": _EXTERNAL + _TEXTCONV,
    "log": _TEXTCONV + _GPG, "show": _TEXTCONV + _GPG, "whatchanged": _TEXTCONV + _GPG, "reflog": _TEXTCONV,
    "range-diff": _TEXTCONV, "blame": _TEXTCONV, "annotate": _TEXTCONV,
    "status": _FSMONITOR, "describe": _FSMONITOR,
}
_INCLUDES = ("include.path", "includeif.*.path")
# Values that switch the feature off rather than name a program.
_OFF = frozenset({"", "false", "no", "off", "0"})


def git_dir(start: Path) -> Path | None:
    """The git directory of the repository holding ``start`` (a ``.git`` directory, or where a
    ``.git`` file's ``gitdir:`` line points), None outside any repository."""
    for directory in (start, *start.parents):
        dot = directory / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():
            try:
                line = dot.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                return dot
            target = line.removeprefix("gitdir:").strip() if line.startswith("gitdir:") else ""
            return (directory / target).resolve() if target else dot
    return None


def configured_programs(start: Path | None, sub: str, flags: set[str], patch: bool) -> str | None:
    """Why ``git SUB`` run in ``start`` may run a program the repository configures, or None.
    ``flags``: the command's options (``--no-ext-diff`` and ``--no-textconv`` switch those off);
    ``patch``: it shows file contents (a log without patches converts nothing)."""
    keys = tuple(k for k in RUNS.get(sub, ()) if not ("--no-ext-diff" in flags and k in _EXTERNAL)
                 and not (("--no-textconv" in flags or not patch) and k in _TEXTCONV))
    if not keys:
        return None
    if start is None:
        return "its repository is only known when it runs"
    repo = git_dir(start)
    if repo is None:
        return None
    if not repo.is_dir():
        return f"{repo} is not a git directory keel can read"
    found: dict[str, list[str]] = {}
    for config in _config_files(repo):
        try:
            data = config.read_bytes()
        except FileNotFoundError:
            continue
        except OSError:
            return f"{config} cannot be read"
        read = entries(data)
        if read is None:
            return f"{config} has lines keel cannot check"
        for key, values in read.items():
            found.setdefault(key, []).extend(values)
    for key, values in found.items():
        if any(fnmatch.fnmatchcase(key, pattern) for pattern in _INCLUDES):
            return f"its configuration includes {values[-1]!r}, which may set programs git runs"
        value = values[-1].strip('"').lower()
        if key == "core.fsmonitor" and value in ("true", "yes", "on", "1"):
            continue                   # git's own fsmonitor daemon, not a program the repository names
        if any(fnmatch.fnmatchcase(key, pattern) for pattern in keys) and value not in _OFF:
            return f"the repository's configuration sets {key} = {values[-1]!r}, a program git {sub} runs"
    return None


def _config_files(repo: Path) -> list[Path]:
    """``config`` and ``config.worktree`` of the repository, and of its common directory for a
    worktree (``commondir``)."""
    dirs = [repo]
    try:
        common = (repo / "commondir").read_text(encoding="utf-8").strip()
        dirs.append((repo / common).resolve())
    except OSError:
        pass
    return [d / name for d in dirs for name in ("config", "config.worktree")]
