"""Allow only on positive knowledge (issue 7, item 6): a table test over EVERY command the policy can
allow. For each, a known-good invocation is allowed (under a confining tier, where the most is
allowed), and the same invocation with an unknown option, an unknown ``--opt=value`` form or an
abbreviation of one of its own long options is not.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from keel.policy.shell.options import FREE, option_list
from keel.policy.shell.optlists import LISTS
from keel.policy.shell.risk import JUDGES, classify_command

# Where the option goes and what follows it, for commands that need operands to be allowed at
# all. Default: "<key> ↓ f.py".
SAMPLES: dict[str, tuple[str, str]] = {
    "git commit": ("git commit", "-m x"), "git checkout": ("git checkout", "-b topic"),
    "git switch": ("git switch", "-c topic"), "git merge": ("git merge", "main"),
    "git rebase": ("git rebase", "main"), "git restore": ("git restore", "f.py"), "git add": ("git add", "f.py"),
    "git stash": ("git stash", ""), "git branch": ("git branch", ""), "git tag": ("git tag", ""),
    "git config": ("git config", "--get user.name"), "git remote": ("git remote", ""),
    "git worktree": ("git worktree", "list"), "git notes": ("git notes", "list"), "git reflog": ("git reflog", ""),
    "git help": ("git help", ""), "git var": ("git var", "-l"), "git version": ("git version", ""),
    "git cat-file": ("git cat-file", "-t HEAD"), "git show-index": ("git show-index", ""),
    "git": ("git", "status"),
    "sed": ("sed", "-n p f.py"), "awk": ("awk", "1 f.py"), "tr": ("tr", "a b"), "cut": ("cut", "-f1 f.py"),
    "jq": ("jq", ". f.py"), "find": ("find", "."), "fd": ("fd", "x"), "rg": ("rg", "x"), "ag": ("ag", "x f.py"),
    "grep": ("grep", "x f.py"), "egrep": ("egrep", "x f.py"), "fgrep": ("fgrep", "x f.py"),
    "zgrep": ("zgrep", "x f.py"), "tar": ("tar", "-tf a.tar"), "unzip": ("unzip", "-l a.zip"),
    "gzip": ("gzip", "-c f.py"), "bzip2": ("bzip2", "-c f.py"), "xz": ("xz", "-c f.py"), "zstd": ("zstd", "-c f.py"),
    "gunzip": ("gunzip", "-c f.gz"), "bunzip2": ("bunzip2", "-c f.bz2"), "unxz": ("unxz", "-c f.xz"),
    "unzstd": ("unzstd", "-c f.zst"), "diff": ("diff", "f.py g.py"), "cmp": ("cmp", "f.py g.py"),
    "comm": ("comm", "f.py g.py"), "join": ("join", "f.py g.py"), "hostname": ("hostname", ""),
    "date": ("date", ""), "seq": ("seq", "3"), "sleep": ("sleep", "0"), "mkdir": ("mkdir", "newdir"),
    "touch": ("touch", "new.txt"), "cp": ("cp", "f.py g.py"), "mv": ("mv", "f.py g.py"),
    "tee": ("tee", "out.txt"), "truncate": ("truncate", "-s 0 f.py"), "rmdir": ("rmdir", "emptydir"),
    "python": ("python", "-c pass"), "pytest": ("pytest", ""), "py.test": ("py.test", ""),
    "node": ("node", "--test"), "nodejs": ("nodejs", "--test"), "npm": ("npm", "test"), "yarn": ("yarn", "test"),
    "pnpm": ("pnpm", "test"), "cargo": ("cargo", "test"), "go": ("go", "test ./..."), "go run": ("go run", "."),
    "pip": ("pip", "list"), "pip3": ("pip3", "list"), "make": ("make", "test"), "ruff": ("ruff", "check ."),
    "coverage": ("coverage", "report"), "mypy": ("mypy", "src"), "dmypy": ("dmypy", "check src"),
    "unittest": ("python -m unittest", ""), "doctest": ("python -m doctest", "f.py"),
    "py_compile": ("python -m py_compile", "f.py"), "compileall": ("python -m compileall", "src"),
    "black": ("black", "--check ."), "isort": ("isort", "--check ."), "prettier": ("prettier", "--check ."),
    "eslint": ("eslint", "src"), "tsc": ("tsc", "--noEmit"), "vitest": ("vitest", "run"),
    "apt": ("apt", "list"), "brew": ("brew", "list"), "dnf": ("dnf", "list"), "yum": ("yum", "list"),
    "apk": ("apk", "info"), "pacman": ("pacman", "-Q"), "zypper": ("zypper", "search x"), "snap": ("snap", "list"),
    "gem": ("gem", "list"), "conda": ("conda", "list"), "mamba": ("mamba", "list"), "bundle": ("bundle", "list"),
    "pyright": ("pyright", "src"), "flake8": ("flake8", "src"), "pylint": ("pylint", "src"),
    "pycodestyle": ("pycodestyle", "src"), "pyflakes": ("pyflakes", "src"), "jest": ("jest", ""),
    "mocha": ("mocha", ""), "rm": ("rm", "f.py"), "unlink": ("unlink", "f.py"),
}
# Keys whose commands are never allowed, whatever their options (the list documents them only).
NEVER_ALLOWED = frozenset({"apt-get", "git clean"})   # git clean: asks unless a snapshot holds the files


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("options")
    workspace = root / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=workspace, check=True)
    for rel in ("f.py", "g.py", "a.tar", "a.zip", "f.gz", "f.bz2", "f.xz", "f.zst", "src/a.py", "out.txt"):
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text("x\n")
    (workspace / "emptydir").mkdir()
    return workspace


def allowed(command: str, ws: Path) -> bool:
    return classify_command(command, ws, confined=True).decision == "allow"


def _sample(key: str) -> tuple[str, str]:
    return SAMPLES.get(key, (key, "f.py"))


def _abbreviations(key: str) -> list[str]:
    spec = option_list(key)
    assert spec is not None
    out = []
    for option in sorted(spec.known):
        is_long = option.startswith("--") or (spec.single_dash and len(option) > 2)
        if not is_long or len(option) < 5:
            continue
        short = option[:-1]
        if short not in spec.known and short.rstrip("-") not in spec.known:
            out.append(short)
    return out


@pytest.mark.parametrize("key", sorted(k for k in LISTS if k not in NEVER_ALLOWED))
def test_every_listed_command_asks_on_unknown_and_abbreviated_options(key: str, ws: Path) -> None:
    head, tail = _sample(key)
    base = f"{head} {tail}".strip()
    assert allowed(base, ws), f"the sample {base!r} must be allowed, or the table proves nothing"
    probes = [f"{head} --zz-unknown-option {tail}", f"{head} --zz-unknown=./out.txt {tail}"]
    if not (option_list(key) and option_list(key).single_dash):  # type: ignore[union-attr]
        probes.append(f"{head} -\u00e9 {tail}")          # a short option no tool has
    probes += [f"{head} {abbreviation} {tail}" for abbreviation in _abbreviations(key)]
    passed = [p.strip() for p in probes if allowed(p.strip(), ws)]
    assert not passed, f"allowed without knowing the option: {passed[:5]}"


def test_every_judged_command_asks_on_an_unknown_option(ws: Path) -> None:
    """Commands without a list know no options: ``cmd --zz`` is never allowed for any of them."""
    passed = []
    for name in sorted(JUDGES) + ["python3"]:
        if name in FREE:
            continue
        head, tail = _sample(name)
        command = f"{head} --zz-unknown-option {tail}".strip()
        if allowed(command, ws):
            passed.append(command)
    assert not passed, passed


@pytest.mark.parametrize("command", [
    "ls $OPTS", "du \"$X\" .", "sort $(cat list) f.py", "git log $FLAGS", "pytest $ARGS", "wc `echo -l` f.py",
    "go test $GOFLAGS ./...", "cargo test $X", "head \"${N}\" f.py",
])
def test_an_option_built_at_run_time_asks(command: str, ws: Path) -> None:
    assert not allowed(command, ws)


@pytest.mark.parametrize("command", [
    "sort -o out.txt f.py", "sort --output=out.txt f.py", "git log --output=out.txt", "git diff --output out.txt",
    "pytest --junitxml=out.txt", "pytest --junit-xml out.txt", "pytest --report-log=out.txt",
    "pytest --log-file=out.txt", "pytest --debug=out.txt", "mypy --junit-xml out.txt src",
    "mypy --html-report rep src", "ruff check -o out.txt .", "ruff check --output-file=out.txt .",
    "eslint -o out.txt src", "tsc --outDir build", "go test -coverprofile=c.out ./...", "go build -o bin/x .",
    "tar -tf a.tar --index-file=out.txt", "tree -o out.txt", "shuf -o out.txt f.py", "coverage html -d html",
    "jest --outputFile=out.txt", "node --test --test-reporter-destination=out.txt",
    "pytest --cov=src --cov-report=html:cov",
])
def test_output_options_are_writes(command: str, ws: Path) -> None:
    """Inside the workspace: a workspace write (asks unconfined, allowed confined); outside: deny."""
    assert classify_command(command, ws, confined=False).decision == "ask", command
    assert classify_command(command, ws, confined=True).decision == "allow", command
    outside = (command.replace("out.txt", "/tmp/keel-probe-out").replace("bin/x", "/tmp/keel-x")
               .replace(" rep ", " /tmp/keel-rep ").replace("build", "/tmp/keel-build").replace("c.out", "/tmp/c")
               .replace("-d html", "-d /tmp/h").replace("html:cov", "html:/tmp/cov"))
    assert classify_command(outside, ws, confined=True).decision == "deny", outside


@pytest.mark.parametrize("command", [
    "ls -la", "ls --color=auto src", "head -20 f.py", "tail -n +5 f.py", "grep -rn --include='*.py' x src",
    "find . -maxdepth 2 -name '*.py' -not -path './.git/*'", "git log --oneline -5", "git log -3 --stat",
    "git diff --stat HEAD~1 -- f.py", "git log --pretty=format:'%h %s' -n 10", "git rev-parse --abbrev-ref HEAD",
    "python -m pytest -q -p no:cacheprovider", "pytest -x --tb=short -k foo", "go test -run TestX -v ./...",
    "cargo test --release -- --nocapture", "npm test -- --coverage", "node index.js --anything", "du -sh .",
    "sort -k2,2n -t, f.py", "sed -n '1,20p' f.py", "git blame -L 1,5 f.py", "rg -n --hidden -g '!.git' x src",
])
def test_common_agent_commands_stay_allowed(command: str, ws: Path) -> None:
    assert allowed(command, ws), classify_command(command, ws, confined=True)
