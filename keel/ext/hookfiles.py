"""Which files a hook's command line runs: what it names, what its program resolves to, and the
files well-known programs run from the working directory.

A hook the user runs outside the sandbox (``sandbox = false``) is judged by these files: when the
session wrote any of them, the model could have put its own code there, so keel does not run the
hook outside the sandbox without a person's yes (keel.ext.hooks). The list errs towards more files:
a wrong "written" costs a question, a missed one an escape.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

# Files a program reads its steps or code from in the directory it runs in.
RUNS_FROM: dict[str, tuple[str, ...]] = {
    "make": ("Makefile", "makefile", "GNUmakefile"), "gmake": ("Makefile", "makefile", "GNUmakefile"),
    "npm": ("package.json",), "npx": ("package.json",), "pnpm": ("package.json", ".pnpmfile.cjs"),
    "yarn": ("package.json", ".yarnrc.yml"), "bun": ("package.json", "bunfig.toml"),
    "just": ("justfile", "Justfile", ".justfile"), "task": ("Taskfile.yml", "Taskfile.yaml"),
    "tox": ("tox.ini", "pyproject.toml", "setup.cfg"), "nox": ("noxfile.py",), "rake": ("Rakefile",),
    "pytest": ("conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"),
    "py.test": ("conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"),
    "cargo": ("Cargo.toml", "build.rs", ".cargo/config.toml"), "go": ("go.mod",),
    "mvn": ("pom.xml", ".mvn/jvm.config"), "gradle": ("build.gradle", "build.gradle.kts", "settings.gradle"),
    "pre-commit": (".pre-commit-config.yaml",), "lefthook": ("lefthook.yml",), "direnv": (".envrc",),
    "uv": ("pyproject.toml",), "poetry": ("pyproject.toml",), "hatch": ("pyproject.toml",),
    "pip": ("setup.py", "pyproject.toml"),
}


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:                      # unbalanced quotes: plain splitting still finds the names
        return command.split()


def candidates(command: str, workspace: Path, path_env: str) -> list[Path]:
    """The files ``command`` (run by ``sh -c`` in ``workspace``) names or runs, whether they exist
    yet or not: every word as a path (also ``--opt=FILE``), each program resolved on ``path_env``
    and its real path (the interpreter behind a link), and what well-known programs among its words
    read in the workspace (``make``'s Makefile, ``npm``'s package.json, pytest's conftest.py,
    ``python -m pkg``'s package)."""
    found: list[Path] = []
    words = _words(command)
    for i, word in enumerate(words):
        for text in (word, word.partition("=")[2] if word.startswith("-") else ""):
            if text:
                found += _as_file(text, workspace)
        name = os.path.basename(word)
        if i == 0 or words[i - 1] in ("&&", "||", ";", "|", "exec", "env", "sudo", "nice", "time"):
            program = shutil.which(word, path=path_env) if "/" not in word else None
            if program:
                found += [Path(program), Path(os.path.realpath(program))]
        found += [workspace / rel for rel in RUNS_FROM.get(name, ())]
        if name.startswith("python") and i + 2 < len(words) and words[i + 1] == "-m":
            module = words[i + 2].split(".")[0]
            found += [workspace / f"{module}.py", workspace / module / "__init__.py", workspace / module / "__main__.py"]
        if name in ("make", "gmake"):
            found += _make_files(words[i + 1:], workspace)
    return list(dict.fromkeys(found))


def files_run_by(command: str, workspace: Path, path_env: str) -> list[Path]:
    """``candidates`` that exist as files now."""
    return [p for p in candidates(command, workspace, path_env) if p.is_file()]


def _as_file(text: str, workspace: Path) -> list[Path]:
    if "\x00" in text or len(text) > 4096:
        return []
    path = Path(os.path.expanduser(text))
    path = path if path.is_absolute() else workspace / path
    try:
        return [path, Path(os.path.realpath(path))]
    except (OSError, ValueError):
        return []


def _make_files(args: list[str], workspace: Path) -> list[Path]:
    """``make -f FILE`` and ``make -C DIR`` (the Makefile of DIR)."""
    found: list[Path] = []
    for flag, value in zip(args, args[1:], strict=False):
        if flag in ("-f", "--file", "--makefile"):
            found += _as_file(value, workspace)
        elif flag in ("-C", "--directory"):
            base = workspace / value
            found += [base / name for name in RUNS_FROM["make"]]
    return found


def fingerprints(paths: list[Path]) -> dict[Path, tuple[int, int, int]]:
    return {p: stat_key(p) for p in paths}


def written_among(files: list[Path], workspace: Path, written: set[str],
                  before: dict[Path, tuple[int, int, int]]) -> list[str]:
    """The files of ``files`` in the workspace that this session wrote: named in ``written``
    (workspace-relative paths the session's record holds), or changed since ``before`` (their stat
    keys when the session began; one not looked at then counts as changed). Files outside the
    workspace are not the session's to write under a confining tier (with none, nothing confines
    the hook either)."""
    root = Path(os.path.realpath(workspace))
    hits: list[str] = []
    for path in files:
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(root):
            continue
        rel = real.relative_to(root).as_posix()
        if rel in written or stat_key(path) != before.get(path):
            hits.append(rel)
    return list(dict.fromkeys(hits))


def stat_key(path: Path) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1, -1)
    return st.st_size, st.st_mtime_ns, st.st_ino
