"""Evaluation cases: load a case folder, lay it out as a fresh git workspace, grade a workspace.

A case is a folder ``evals/<id>/``::

    case.toml     title, category, size, tags, language, [acceptance] commands/must_change/...
                  (a question or review case: [acceptance] answer_mentions, nothing may change)
    task.md       what a user would type
    repo/         starting files (optional if setup.sh builds them)
    setup.sh      optional; runs in the workspace after repo/ is copied, before the initial commit
    solution/     reference solution overlaid on repo/; solution/.delete lists paths to remove
    script.jsonl  a scripted trajectory (keel/testing/script.py format) that solves the case

Loading is pure validation (every error names the file and the field); ``materialize`` and ``grade``
do the I/O with real subprocesses and real git, so "files changed" means what git says changed since
the initial commit.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.policy.runner import Job, JobResult, run

CATEGORIES = ("feature", "bugfix", "refactor", "tests", "question", "review")
ANSWERED = ("question", "review")   # graded by the answer: it mentions what it must, nothing changed
SIZES = ("small", "medium", "large")
DEFAULT_TIMEOUT_S = 120.0
OUTPUT_TAIL = 4000  # characters of a failing command's output kept in a Grade
_OWN_OUTPUT_CAP = 64 * 2**20   # git's output (file lists) is read whole
CASE_FILE = "case.toml"
# Fixed identity and dates so the initial commit is reproducible and never reads the user's git config.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "keel-eval", "GIT_AUTHOR_EMAIL": "eval@keel.invalid",
    "GIT_COMMITTER_NAME": "keel-eval", "GIT_COMMITTER_EMAIL": "eval@keel.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}


class CaseError(ValueError):
    """A case folder is unusable; the message names the file and the field."""


@dataclass(frozen=True)
class Acceptance:
    commands: tuple[str, ...]
    must_change: tuple[str, ...] = ()
    must_not_change: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    # question and review cases: each entry must be in the answer (any of its "|"-separated spellings)
    answer_mentions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    id: str
    path: Path
    title: str
    category: str
    size: str
    language: str
    task: str
    acceptance: Acceptance
    tags: tuple[str, ...] = ()

    @property
    def repo_dir(self) -> Path | None:
        d = self.path / "repo"
        return d if d.is_dir() else None

    @property
    def setup_script(self) -> Path | None:
        s = self.path / "setup.sh"
        return s if s.is_file() else None

    @property
    def solution_dir(self) -> Path | None:
        d = self.path / "solution"
        return d if d.is_dir() else None

    @property
    def script_path(self) -> Path | None:
        s = self.path / "script.jsonl"
        return s if s.is_file() else None


@dataclass(frozen=True)
class CheckResult:
    kind: str  # "command" | "must_change" | "must_not_change" | "unchanged" | "answer"
    target: str  # the command or the path
    passed: bool
    detail: str = ""  # why it failed, or the output tail of a command
    exit_code: int | None = None
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "passed": self.passed, "detail": self.detail,
                "exit_code": self.exit_code, "duration_s": round(self.duration_s, 3)}


@dataclass(frozen=True)
class Grade:
    passed: bool
    checks: tuple[CheckResult, ...] = ()
    changed_files: tuple[str, ...] = ()

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]

    def summary(self) -> str:
        if self.passed:
            return f"passed ({len(self.checks)} checks)"
        return "failed: " + "; ".join(f"{c.kind} {c.target}: {c.detail.splitlines()[0] if c.detail else 'failed'}"
                                      for c in self.failures)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": [c.to_dict() for c in self.checks],
                "changed_files": list(self.changed_files)}


# ---- loading (pure validation) -----------------------------------------------------------------


def load_case(path: str | os.PathLike[str]) -> Case:
    """Read and validate one case folder; raise CaseError naming file and field on bad input."""
    folder = Path(path)
    if not folder.is_dir():
        raise CaseError(f"{folder}: not a case folder (no such directory)")
    toml_path = folder / CASE_FILE
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaseError(f"{toml_path}: missing (every case needs a {CASE_FILE})") from None
    except tomllib.TOMLDecodeError as exc:
        raise CaseError(f"{toml_path}: not valid TOML ({exc})") from None
    task_path = folder / "task.md"
    try:
        task = task_path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise CaseError(f"{task_path}: missing (the task a user would type)") from None
    if not task:
        raise CaseError(f"{task_path}: empty (the task a user would type)")
    case = parse_case(raw, folder, task, where=str(toml_path))
    if case.repo_dir is None and case.setup_script is None:
        raise CaseError(f"{folder}: needs repo/ or setup.sh to build the starting workspace")
    delete = folder / "solution" / ".delete"
    if delete.exists() and not delete.is_file():
        raise CaseError(f"{delete}: must be a file listing paths to remove, one a line")
    return case


def parse_case(raw: dict[str, Any], folder: Path, task: str, where: str) -> Case:
    known = {"title", "category", "size", "tags", "language", "acceptance", "id"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise CaseError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
    title = _str(raw, "title", where)
    category = _choice(raw, "category", CATEGORIES, where)
    size = _choice(raw, "size", SIZES, where)
    language = _str(raw, "language", where)
    tags = _str_list(raw, "tags", where, required=False)
    case_id = raw.get("id", folder.name)
    if not isinstance(case_id, str) or not case_id.strip():
        raise CaseError(f"{where}: field 'id' must be a non-empty string")
    acc = raw.get("acceptance")
    if not isinstance(acc, dict):
        raise CaseError(f"{where}: missing table [acceptance] (commands, must_change, must_not_change, timeout_s)")
    acc_known = {"commands", "must_change", "must_not_change", "timeout_s", "answer_mentions"}
    unknown = sorted(set(acc) - acc_known)
    if unknown:
        raise CaseError(f"{where}: unknown field(s) in [acceptance]: {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(acc_known))}")
    answered = category in ANSWERED
    commands = _str_list(acc, "commands", where, required=not answered, prefix="acceptance.")
    mentions = _str_list(acc, "answer_mentions", where, required=answered, prefix="acceptance.")
    if not commands and not answered:
        raise CaseError(f"{where}: field 'acceptance.commands' must list at least one command")
    if answered != bool(mentions):
        raise CaseError(f"{where}: field 'acceptance.answer_mentions' is for question and review cases, which "
                        "need it: what the answer must mention")
    must_change = _paths(acc, "must_change", where)
    must_not_change = _paths(acc, "must_not_change", where)
    both = sorted(set(must_change) & set(must_not_change))
    if both:
        raise CaseError(f"{where}: path(s) both in must_change and must_not_change: {', '.join(both)}")
    timeout = acc.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise CaseError(f"{where}: field 'acceptance.timeout_s' must be a number of seconds > 0")
    return Case(id=case_id.strip(), path=folder.resolve(), title=title, category=category, size=size,
                language=language, task=task, tags=tags,
                acceptance=Acceptance(commands=commands, must_change=must_change, must_not_change=must_not_change,
                                      timeout_s=float(timeout), answer_mentions=mentions))


def _str(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise CaseError(f"{where}: field '{key}' must be a non-empty string")
    return value.strip()


def _choice(raw: dict[str, Any], key: str, choices: Sequence[str], where: str) -> str:
    value = raw.get(key)
    if value not in choices:
        raise CaseError(f"{where}: field '{key}' must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _str_list(raw: dict[str, Any], key: str, where: str, required: bool, prefix: str = "") -> tuple[str, ...]:
    if key not in raw:
        if required:
            raise CaseError(f"{where}: missing field '{prefix}{key}'")
        return ()
    value = raw[key]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise CaseError(f"{where}: field '{prefix}{key}' must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def _paths(acc: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    paths = _str_list(acc, key, where, required=False, prefix="acceptance.")
    for p in paths:
        if p.startswith("/") or ".." in Path(p).parts:
            raise CaseError(f"{where}: field 'acceptance.{key}' holds {p!r}; paths are relative to the "
                            "workspace and stay inside it")
    return tuple(p.rstrip("/") for p in paths)


def load_cases(root: str | os.PathLike[str], selectors: Iterable[str] = ()) -> list[Case]:
    """Every case under root (sorted by id), or those picked by selectors.

    A selector is a case id, a path to a case folder, a glob over ids (``py-*``), or
    ``category:X`` / ``size:X`` / ``tag:X`` / ``language:X``. A selector that matches nothing is an
    error: a typo must not silently shrink the suite.
    """
    base = Path(root)
    chosen = list(selectors)
    direct = [Path(s) for s in chosen if (Path(s) / CASE_FILE).is_file()]
    if not base.is_dir() and len(direct) != len(chosen):
        raise CaseError(f"{base}: no such cases directory")
    every = ([load_case(d) for d in sorted(base.iterdir()) if (d / CASE_FILE).is_file()]
             if base.is_dir() else [])
    if not chosen:
        if not every:
            raise CaseError(f"{base}: no cases (folders holding {CASE_FILE})")
        return every
    picked: dict[str, Case] = {}
    for selector in chosen:
        if (Path(selector) / CASE_FILE).is_file():
            case = load_case(selector)
            picked.setdefault(case.id, case)
            continue
        matches = [c for c in every if _matches(c, selector)]
        if not matches:
            raise CaseError(f"no case matches {selector!r} under {base}")
        for case in matches:
            picked.setdefault(case.id, case)
    return sorted(picked.values(), key=lambda c: c.id)


def _matches(case: Case, selector: str) -> bool:
    from fnmatch import fnmatchcase

    key, sep, value = selector.partition(":")
    if sep and key in {"category", "size", "tag", "language"}:
        if key == "tag":
            return value in case.tags
        return bool(getattr(case, key) == value)
    return fnmatchcase(case.id, selector)


# ---- materialize and grade (I/O) ---------------------------------------------------------------


def _own(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> JobResult:
    """A program of the eval's own (git, the case's setup script) through keel's runner: keel's
    bookkeeping, not the model's, so as it is, with the environment given."""
    return run(Job(cwd, argv=argv, sandbox=False, limits=False, scrub=False, env=env, timeout_s=timeout,
                   stderr_apart=True, output_cap=_OWN_OUTPUT_CAP, aftercare=False))


def git(args: Sequence[str], cwd: Path, check: bool = True, timeout: float = 60) -> str:
    proc = _own(["git", *args], cwd, {**os.environ, **_GIT_ENV}, timeout)
    if check and proc.exit_code != 0:
        raise CaseError(f"git {' '.join(args)} failed in {cwd}: {(proc.stderr or '').strip() or proc.output.strip()}")
    return proc.output


def materialize(case: Case, dest: str | os.PathLike[str], with_solution: bool = False) -> Path:
    """Lay out the case's starting workspace at dest (created; must be empty or absent) and commit it.

    with_solution overlays the reference solution *after* the initial commit, so grading sees it as
    the change a successful run would make.
    """
    root = Path(dest)
    if root.exists() and any(root.iterdir()):
        raise CaseError(f"{root}: destination is not empty")
    root.mkdir(parents=True, exist_ok=True)
    if case.repo_dir is not None:
        shutil.copytree(case.repo_dir, root, dirs_exist_ok=True, symlinks=True)
    if case.setup_script is not None:
        proc = _own(["bash", str(case.setup_script)], root, {**os.environ, "CASE_DIR": str(case.path)},
                    case.acceptance.timeout_s)
        if proc.exit_code != 0:
            raise CaseError(f"{case.setup_script}: exited {proc.exit_code}: "
                            f"{(proc.stderr or proc.output).strip()[-OUTPUT_TAIL:]}")
    git(["init", "-q", "-b", "main"], root)
    git(["add", "-A", "-f", "."], root)
    git(["commit", "-q", "--allow-empty", "--no-verify", "-m", f"eval case {case.id}: starting state"], root)
    if with_solution:
        apply_solution(case, root)
    return root


def apply_solution(case: Case, workspace: Path) -> None:
    solution = case.solution_dir
    if solution is None:
        raise CaseError(f"{case.path}: no solution/ folder")
    delete = solution / ".delete"
    for entry in solution.iterdir():
        if entry.name == ".delete":
            continue
        target = workspace / entry.name
        if entry.is_dir():
            shutil.copytree(entry, target, dirs_exist_ok=True, symlinks=True, copy_function=shutil.copy)
        else:
            # Not copy2: a solution file of the same size keeping the original's mtime looks unchanged
            # to git's stat check, so the solution's own edit would be graded "not changed".
            shutil.copy(entry, target)
    if delete.is_file():
        for line in delete.read_text(encoding="utf-8").splitlines():
            rel = line.strip()
            if not rel or rel.startswith("#"):
                continue
            target = (workspace / rel).resolve()
            if not target.is_relative_to(workspace.resolve()):
                raise CaseError(f"{delete}: {rel!r} points outside the workspace")
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()


def changed_files(workspace: Path) -> list[str]:
    """Paths that differ from the initial commit: modified, added, deleted, untracked (not ignored)."""
    first = git(["rev-list", "--max-parents=0", "HEAD"], workspace).split()[0]
    tracked = git(["diff", "--name-only", "--no-renames", first], workspace).splitlines()
    untracked = git(["ls-files", "--others", "--exclude-standard"], workspace).splitlines()
    # Byte-code caches appear whenever anything imports the code; they are nobody's change.
    return sorted(p for p in set(tracked) | set(untracked) if not _is_cache(p))


def _is_cache(path: str) -> bool:
    return "__pycache__/" in path or path.endswith(".pyc") or path.startswith(".pytest_cache/")


def _touches(changed: Sequence[str], path: str) -> bool:
    """A path names a file, or a folder whose contents count."""
    return any(c == path or c.startswith(path + "/") for c in changed)


def grade(case: Case, workspace: str | os.PathLike[str], answer: str | None = None) -> Grade:
    """Run every acceptance command (all of them, even after a failure) and check the file rules; for a
    question or review case, the answer (the run's summary) must mention what it must and nothing may change:
    a wrong or empty answer fails, and a run that said complete with it is a false done."""
    root = Path(workspace)
    checks: list[CheckResult] = []
    changed = changed_files(root)
    if case.category in ANSWERED:
        checks.append(CheckResult("unchanged", ".", not changed, "" if not changed else
                                  "a question was answered by changing " + ", ".join(changed[:8])))
        checks += [_mentioned(spellings, answer or "") for spellings in case.acceptance.answer_mentions]
    for path in case.acceptance.must_change:
        ok = _touches(changed, path)
        checks.append(CheckResult("must_change", path, ok, "" if ok else "not changed since the initial commit"))
    for path in case.acceptance.must_not_change:
        ok = not _touches(changed, path)
        checks.append(CheckResult("must_not_change", path, ok, "" if ok else "changed, but must stay as it was"))
    for command in case.acceptance.commands:
        checks.append(run_command(command, root, case.acceptance.timeout_s, case_dir=case.path))
    return Grade(passed=all(c.passed for c in checks), checks=tuple(checks), changed_files=tuple(changed))


def _mentioned(spellings: str, answer: str) -> CheckResult:
    """Is one of ``spellings`` ("subtract|a - b") in the answer (any case, spaces collapsed)?"""
    text = " ".join(answer.lower().split())
    found = any(" ".join(s.lower().split()) in text for s in spellings.split("|") if s.strip())
    detail = "" if found else ("no answer" if not text else f"the answer does not mention {spellings!r}")
    return CheckResult("answer", spellings, found, detail)


def run_command(command: str, cwd: Path, timeout_s: float, case_dir: Path | None = None) -> CheckResult:
    """One acceptance command, run after the agent on what it left: through keel's runner as a
    command of the model's (the sandbox, the scrubbed environment, limits, the whole tree killed at
    the end, so a server it forgot to stop does not outlive it). ``CASE_DIR`` points at the case
    folder, for acceptance files the agent never sees; the command may read it."""
    extra = {"PYTHONDONTWRITEBYTECODE": "1"}    # keep __pycache__ from showing up as changed files
    if case_dir is not None:
        extra["CASE_DIR"] = str(case_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEL_")}
    ran = run(Job(cwd, command=command, env=env, extra_env=extra, timeout_s=timeout_s, output_cap=2 * OUTPUT_TAIL,
                  read_paths=(str(case_dir),) if case_dir is not None else ()))
    out = ran.output
    if ran.timed_out:
        return CheckResult("command", command, False, f"timed out after {timeout_s:g}s\n{out[-OUTPUT_TAIL:]}",
                           None, ran.elapsed_s)
    ok = ran.exit_code == 0
    detail = "" if ok else f"exit {ran.exit_code}\n{out[-OUTPUT_TAIL:]}"
    return CheckResult("command", command, ok, detail, ran.exit_code, ran.elapsed_s)


def case_summary(case: Case) -> dict[str, Any]:
    return {"id": case.id, "title": case.title, "category": case.category, "size": case.size,
            "language": case.language, "tags": list(case.tags)}


__all__ = ["Acceptance", "Case", "CaseError", "CheckResult", "Grade", "apply_solution", "changed_files",
           "grade", "load_case", "load_cases", "materialize"]
