"""Allow only on positive knowledge (issue 7, item 6): a table test over EVERY command the policy can
allow. Each entry of keel/policy/shell/facts.toml names known-good invocations (``match``, checked
against the entry when the table loads); its first one must be allowed by the whole policy (under a
confining tier, where the most is allowed), and the same invocation with an unknown option, an
unknown ``--opt=value`` form or an abbreviation of one of its own long options must not be.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest

from keel.policy.shell.facts import FACTS_FILE, FREE, FactsError, load, table
from keel.policy.shell.risk import JUDGES, classify_command

RAW = tomllib.loads(FACTS_FILE.read_text())
ENTRIES = {k: v for k, v in RAW.items() if k != "groups"}
# Entries only the judges read to parse a command they ask for anyway (no match example).
PARSE_ONLY = frozenset(k for k, v in ENTRIES.items() if not v.get("match"))
# Keys whose commands are never allowed, whatever their options (the list documents them only).
NEVER_ALLOWED = frozenset({"git clean", "shred", "install", "chown", "chgrp", "curl", "wget", "scp", "rsync", "ssh",
                           "sftp"})   # git clean: asks unless a snapshot holds the files


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
    """The entry's first match example, split where an option may go: after the command (and its
    subcommand or ``-m MODULE``)."""
    words = shlex.split(ENTRIES[key]["match"][0])
    at = len(key.split(" ")) + (2 if words[1:2] == ["-m"] else 0)
    return shlex.join(words[:at]), shlex.join(words[at:])


def _abbreviations(key: str) -> list[str]:
    spec = table().spec(key)
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


@pytest.mark.parametrize("key", sorted(k for k in ENTRIES if k not in NEVER_ALLOWED | PARSE_ONLY))
def test_every_listed_command_asks_on_unknown_and_abbreviated_options(key: str, ws: Path) -> None:
    head, tail = _sample(key)
    base = f"{head} {tail}".strip()
    assert allowed(base, ws), f"the sample {base!r} must be allowed, or the table proves nothing"
    probes = [f"{head} --zz-unknown-option {tail}", f"{head} --zz-unknown=./out.txt {tail}"]
    if not table().spec(key).single_dash:  # type: ignore[union-attr]
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
        head, tail = _sample(name) if name in ENTRIES and name not in PARSE_ONLY else (name, "f.py")
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


def test_the_table_loads_and_every_example_agrees() -> None:
    """Each entry's match/not_match/writes examples were checked when it loaded; count them."""
    counts = [len(v.get(kind, ())) for v in ENTRIES.values() for kind in ("match", "not_match", "writes")]
    assert sum(counts) >= 500 and len(table().specs) == len(ENTRIES)


@pytest.mark.parametrize(("entry", "problem"), [
    ('[sort]\noptions = "-o=W"\nmatch = ["sort --output=x f"]', "match 'sort --output=x f'"),
    ('[sort]\noptions = "-o=W"\nnot_match = ["sort -o x f"]', "not_match 'sort -o x f': accepted"),
    ('[sort]\noptions = "-o="\nwrites = [["sort -o x f", "x"]]', "'x' not found as written"),
    ('[sort]\noptions = "-o=W"\nmatches = []', "unknown key(s) matches"),
    ('[egrep]\nsame_as = "nothing"', "same_as names no entry"),
])
def test_a_wrong_example_stops_the_table_from_loading(entry: str, problem: str) -> None:
    with pytest.raises(FactsError, match=re.escape(problem)):
        load(entry)


def test_one_table_holds_each_fact_once() -> None:
    """pytest's --junitxml once (a write), mv without install's -m/-o/-g, cp's --sparse taking its value."""
    text = FACTS_FILE.read_text()
    assert text.count("--junitxml=W") == 1
    mv, install, cp = table().spec("mv"), table().spec("install"), table().spec("cp")
    assert mv is not None and install is not None and cp is not None
    assert not {"-m", "-o", "-g"} & mv.known and {"-m", "-o", "-g"} <= install.valued
    assert "--sparse" in cp.valued
    keel = Path(__file__).parent.parent / "keel" / "policy" / "shell"
    assert not [p.name for p in keel.glob("*.py") if "junitxml" in p.read_text()], "a second table"
