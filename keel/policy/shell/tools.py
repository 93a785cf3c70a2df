"""Judges for language tooling: interpreters, test runners, linters, builds, package managers.

Running the project's checks and scripts (pytest, ruff check, cargo test, ``python x.py``) is
allowed: executed code is contained by the OS sandbox, and running it is how the agent
verifies its work. Installing packages, formatting in place, publishing and anything that
reaches the network asks.
"""

from __future__ import annotations

import re

from keel.policy.shell.builds import JUDGES as BUILD_JUDGES
from keel.policy.shell.builds import subcommand, unclear
from keel.policy.shell.commands import (
    Finding,
    Invocation,
    Judge,
    JudgeEnv,
    allow,
    ask,
    judge_delete,
    judge_write,
    rewrites,
    runs_code,
)
from keel.policy.shell.facts import PYTHON, has, options, values_of
from keel.policy.shell.parse import Word
from keel.policy.shell.pymodules import judge_module
from keel.policy.shell.unwrap import SHELLS

INTERPRETERS = frozenset({"node", "perl", "ruby", "php", "lua", "Rscript", "deno", "bun"})
RUN = "runs code (allowed unasked only when an OS tier confines it)"


# -- python ------------------------------------------------------------------------------------

_CHECK_MODULES = frozenset({"pytest", "unittest", "mypy", "ruff", "pyflakes", "py_compile", "compileall",
                            "pylint", "flake8", "pycodestyle", "doctest", "black", "isort", "coverage", "pip"})
_ASK_MODULES = frozenset({"http.server", "venv", "ensurepip", "smtpd", "ftplib", "pdb", "idlelib", "tox",
                          "nox", "twine", "build", "pipx", "pydoc"})


def _python(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    args = inv.args
    i = 0
    while i < len(args):
        text = args[i].value
        if text.startswith(("-W", "-X")) and not text.startswith("--"):
            i += 2 if len(text) == 2 else 1
            continue
        if re.fullmatch(r"-[BuOIEsSqvbdPR]*c.*", text):
            return [runs_code(f"python -c {RUN}")]
        m = re.fullmatch(r"-[BuOIEsSqvbdPR]*m(.*)", text)
        if m:
            module = m.group(1) or (args[i + 1].value if i + 1 < len(args) else "")
            return _python_module(module, args[i + 1:] if m.group(1) else args[i + 2:], inv, env)
        if re.fullmatch(r"-[BuOIEsSqvbdPR]*i[BuOIEsSqvbdPR]*", text):
            return [ask("python -i is interactive")]
        if text == "-" or not text.startswith("-"):
            if _is_test_script(args[i], inv, env):
                return [allow("python runs a test script of the project (a check)")]
            return [runs_code(f"python script {RUN}")]
        i += 1
    return [runs_code(f"python reads its program from stdin; {RUN}")]


def _is_test_script(word: Word, inv: Invocation, env: JudgeEnv) -> bool:
    """``python test_x.py`` / ``python tests/x_test.py`` in the workspace: the project's own check."""
    if not word.literal or not re.fullmatch(r"(.*/)?(test_\w+|\w+_test|tests?)\.py", word.value):
        return False
    return all(p.where == "inside" for p in env.paths.places(word, inv.cwds))


def _python_module(module: str, rest: list[Word], inv: Invocation, env: JudgeEnv) -> list[Finding]:
    if module in _CHECK_MODULES:
        judge = JUDGES.get(module) or BUILD_JUDGES.get(module)
        if judge is None:
            return [allow(f"python -m {module} is a check")]
        return judge(Invocation([Word(module, module)] + rest, inv.cwds, inv.extra_args), env)
    if (judged := judge_module(module, rest, inv, env)) is not None:
        return judged
    if module in _ASK_MODULES or module.startswith(("http.", "pip.")):
        return [ask(f"python -m {module} needs approval")]
    return [runs_code(f"python -m {module} {RUN}")]


def _pytest(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """What pytest's options do beyond their list in facts.toml (where its report options are
    marked as writes and judged with every command's options)."""
    parsed = options("pytest", inv.args)
    out = [allow("pytest runs the project's tests")]
    for word in values_of(parsed, "--basetemp"):
        wiped = judge_delete(env, word, inv.cwds, recursive=True, verb="pytest --basetemp wipe")
        exists = any(p.real is not None and p.real.exists() for p in env.paths.places(word, inv.cwds))
        if exists and not env.snapshot and all(f.decision != "deny" for f in wiped):
            # pytest deletes an existing basetemp first: `--basetemp=src` wipes the sources
            wiped.append(ask(f"pytest --basetemp {word.value!r}: pytest deletes that directory first and no "
                             "snapshot holds it", destructive=True))
        out += wiped
    for word in values_of(parsed, "-o", "--override-ini"):
        if not word.literal or word.value.split("=", 1)[0].strip() not in _HARMLESS_INI:
            out.append(ask(f"pytest -o {word.value!r} overrides an ini option not known to be harmless"))
    for word in values_of(parsed, "--rootdir", "--confcutdir"):
        if any(p.where not in ("inside", "root") for p in env.paths.places(word, inv.cwds)):
            out.append(ask(f"pytest takes its configuration from {word.value!r}, outside the workspace"))
    if inv.args and inv.args[-1].value == "--debug":     # no file named: pytestdebug.log here
        out += judge_write(env, Word("pytestdebug.log", "pytestdebug.log"), inv.cwds, verb="pytest --debug writes")
    return out


# ini options `pytest -o` may set without asking: they change output and selection, not where
# files go or which code loads (addopts, basetemp, cache_dir, plugins ... ask).
_HARMLESS_INI = frozenset({"log_cli", "log_cli_level", "log_level", "console_output_style", "filterwarnings",
                           "xfail_strict", "python_files", "python_functions", "python_classes", "markers",
                           "asyncio_mode", "timeout", "verbosity_assertions", "verbosity_test_cases",
                           "empty_parameter_set_mark", "junit_family", "log_format", "log_date_format"})


def _mypy(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    if has(options(inv.name, inv.args), "--install-types"):
        return [ask("mypy --install-types installs packages", network=True)]
    return [allow("mypy checks types")]


_RUFF_SUBCOMMANDS = frozenset({"check", "format", "rule", "config", "linter", "clean", "version", "help",
                               "server", "analyze", "generate-shell-completion"})


def _ruff(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    found = subcommand(inv.args, "ruff")
    if found is None:
        return unclear(inv)
    sub, rest = found
    if sub in ("rule", "config", "linter", "version", "help") or (sub == "" and inv.args):
        return [allow("ruff prints information")]
    parsed = options("ruff", inv.args)
    if sub == "check" or (sub and sub not in _RUFF_SUBCOMMANDS):   # `ruff src/` is the old `ruff check src/`
        if has(parsed, "--fix", "--unsafe-fixes", "--add-noqa", "--fix-only"):
            return rewrites(inv, env, [w for w in parsed.operands if w.value != "check"], "ruff --fix")
        return [allow("ruff check lints")]
    if sub == "format" and any(w.value in ("--check", "--diff") for w in rest):
        return [allow("ruff format --check only reports")]
    if sub == "format":
        return rewrites(inv, env, [w for w in parsed.operands if w.value != "format"], "ruff format")
    return [ask(f"ruff {sub} changes files", destructive=True)]


def _autoflake(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    parsed = options("autoflake", inv.args)
    if has(parsed, "-i", "--in-place"):
        return rewrites(inv, env, parsed.operands, "autoflake --in-place")
    return [allow("autoflake prints its changes")]


def _write_flag(flag: str) -> Judge:
    """gofmt -w, golangci-lint --fix, shfmt -w: rewrites the files with ``flag``, else only prints."""
    def judge(inv: Invocation, env: JudgeEnv) -> list[Finding]:
        parsed = options(inv.name, inv.args)
        if has(parsed, flag):
            return rewrites(inv, env, [w for w in parsed.operands if w.value not in ("run", "./...")],
                            f"{inv.name} {flag}")
        return [allow(f"{inv.name} checks or prints")]

    return judge


def _rustfmt(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    parsed = options("rustfmt", inv.args)
    if has(parsed, "--check") or (values_of(parsed, "--emit") and values_of(parsed, "--emit")[0].value == "stdout"):
        return [allow("rustfmt --check only reports")]
    return rewrites(inv, env, parsed.operands, "rustfmt")


def _formatter(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """black, isort, prettier, eslint: read-only with --check/--diff, otherwise they rewrite files."""
    parsed = options(inv.name, inv.args)
    if inv.name == "eslint":
        if has(parsed, "--rulesdir", "--plugin", "--resolve-plugins-relative-to"):
            return [ask("eslint --rulesdir/--plugin loads other code")]
        if has(parsed, "--fix"):
            return rewrites(inv, env, parsed.operands, "eslint --fix")
        return [allow("eslint lints")]
    if inv.name == "prettier" and not has(parsed, "--write", "-w"):
        return [allow("prettier prints or checks")]
    if inv.name != "prettier" and has(parsed, "--check", "--diff", "-c", "--list-different", "-l"):
        return [allow(f"{inv.name} only checks")]
    return rewrites(inv, env, parsed.operands, inv.name)


def _coverage(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    """coverage run/report/html/xml (its -o/-d/--data-file writes are marked in facts.toml)."""
    parsed = options("coverage", inv.args)
    values = [w.value for w in inv.args]
    checks = values[:1] == ["run"] and any(w.value in _CHECK_MODULES for w in values_of(parsed, "-m"))
    return [allow(f"{inv.name} measures test coverage") if checks or values[:1] != ["run"]
            else runs_code(f"coverage run {RUN}")]


def _check(what: str) -> Judge:
    def judge(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
        return [allow(f"{inv.name} {what}")]

    return judge


def _ask_tool(what: str, network: bool = False) -> Judge:
    def judge(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
        return [ask(f"{inv.name} {what}", network=network)]

    return judge


# -- interpreters ------------------------------------------------------------------------------

def _node(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    parsed = options("node", inv.args)
    operands = parsed.operands
    if has(parsed, "--test"):
        return [allow("node --test runs the project's tests")]
    if not operands and inv.args and all(w.value in ("-v", "--version", "-h", "--help") for w in inv.args):
        return [allow("node prints its version or help")]
    if has(parsed, "-e", "--eval", "-p", "--print") or operands:
        return [runs_code(f"node {RUN}")]
    return [runs_code(f"node reads its program from stdin; {RUN}")]


def _interpreter(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """perl, ruby, php …: a script of the project is code a confining tier runs unasked."""
    script = inv.args[0] if inv.args and not inv.args[0].value.startswith("-") else None
    if script is not None and env.paths.project_program(script, inv.cwds):
        return [runs_code(f"{inv.name} runs {script.value!r}, a script of the project; {RUN}")]
    return [ask(f"{inv.name} runs a script (only python and node scripts and the project's own are allowed "
                "unasked)")]


def _shell_script(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """``bash script.sh`` (``bash -c`` was unwrapped before this): the project's own script is code
    a confining tier runs unasked; any other asks."""
    args, script = inv.args, None
    for i, word in enumerate(args):
        if not word.value.startswith(("-", "+")) and (i == 0 or args[i - 1].value not in ("-o", "+o", "-O", "+O")):
            script = word
            break
    if script is None:
        return [allow(f"{inv.name} reads its program from stdin")]
    if env.paths.project_program(script, inv.cwds):
        return [runs_code(f"{inv.name} runs {script.value!r}, a script of the project; {RUN}")]
    return [ask(f"{inv.name} runs a shell script from outside the project, or one only known when it runs")]


def reads_code_from_stdin(inv: Invocation) -> bool:
    """Would this interpreter take its program from stdin (``curl x | sh``)?"""
    name = inv.name
    values = inv.values
    if name in ("source", "."):
        return bool(values) and values[0] in ("/dev/stdin", "/proc/self/fd/0", "-")
    code_flags = {"-c"} if (name in SHELLS or PYTHON.fullmatch(name)) else {"-e", "-E", "-p", "-r", "--eval"}
    if name in SHELLS and any(v == "-s" for v in values):
        return True
    if any(v in ("--version", "-V", "--help", "-h", "--test") or (v == "-v" and name in ("node", "nodejs"))
           for v in values):
        return False
    if not (name in SHELLS or PYTHON.fullmatch(name) or name in INTERPRETERS):
        return False
    for i, value in enumerate(values):
        if value in code_flags or value == "-m" and PYTHON.fullmatch(name):
            return False
        if value in ("-", "/dev/stdin", "/proc/self/fd/0"):
            return True
        if not value.startswith("-"):
            previous = values[i - 1] if i else ""
            if previous in ("-W", "-X", "-o", "-O", "-r", "--require"):
                continue
            return False
    return True


JUDGES: dict[str, Judge] = {
    "pytest": _pytest, "py.test": _pytest, "mypy": _mypy, "dmypy": _mypy, "ruff": _ruff,
    "pyright": _check("checks types"), "pyflakes": _check("lints"), "flake8": _check("lints"),
    "pylint": _check("lints"), "pycodestyle": _check("lints"), "unittest": _check("runs tests"),
    "doctest": _check("runs tests"), "py_compile": _check("compiles"), "compileall": _check("compiles"),
    "coverage": _coverage, "tsc": _check("type-checks"), "jest": _check("runs tests"),
    "vitest": _check("runs tests"), "mocha": _check("runs tests"),
    "black": _formatter, "isort": _formatter, "prettier": _formatter, "eslint": _formatter,
    "autoflake": _autoflake, "gofmt": _write_flag("-w"), "golangci-lint": _write_flag("--fix"),
    "rustfmt": _rustfmt,
    "node": _node, "nodejs": _node,
    "npx": _ask_tool("downloads and runs packages", network=True),
    "pnpx": _ask_tool("downloads and runs packages", network=True),
    "bunx": _ask_tool("downloads and runs packages", network=True),
    "uv": _ask_tool("changes the environment", network=True), "poetry": _ask_tool("changes the environment", True),
    "pipx": _ask_tool("installs tools", network=True), "tox": _ask_tool("builds environments", network=True),
    "nox": _ask_tool("builds environments", network=True),
    "docker": _ask_tool("controls containers"), "podman": _ask_tool("controls containers"),
    "kubectl": _ask_tool("controls a cluster", network=True),
}
JUDGES.update({name: _interpreter for name in INTERPRETERS - {"node"}})
JUDGES.update({name: _shell_script for name in SHELLS})


def python_judge(name: str) -> Judge | None:
    return _python if PYTHON.fullmatch(name) else None
