"""Judges for text and file-walking tools whose options can run programs or write files:
find, fd, sed, awk, rg and archivers. These are where string allowlists usually break
(``find -exec``, ``sed e``/``w``, ``rg --pre``, ``awk system()``), so each is parsed, not grepped.
"""

from __future__ import annotations

import re

from keel.policy.shell.commands import (
    Finding,
    Invocation,
    Judge,
    JudgeEnv,
    allow,
    ask,
    judge_delete,
    judge_write,
    ws_write,
)
from keel.policy.shell.facts import has, options, values_of
from keel.policy.shell.parse import Word

# -- find / fd -------------------------------------------------------------------------------

_FIND_ACTIONS_EXEC = ("-exec", "-execdir", "-ok", "-okdir")
_FIND_WRITE = ("-fprint", "-fprint0", "-fls", "-fprintf")
_FIND_NOT_FILTERS = frozenset({"-maxdepth", "-mindepth", "-depth", "-xdev", "-mount", "-follow", "-noleaf",
                               "-ignore_readdir_race", "-daystart", "-regextype", "-warn", "-nowarn"})


def _find(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    args = inv.args
    i = 0
    while i < len(args) and args[i].value in ("-H", "-L", "-P") or (i < len(args) and args[i].value.startswith(("-D", "-O"))):
        i += 2 if args[i].value == "-D" else 1
    starts: list[Word] = []
    while i < len(args) and not args[i].value.startswith(("-", "(", "!", ")")):
        starts.append(args[i])
        i += 1
    starts = starts or [Word(".", ".")]
    out = [allow("find only lists files")]
    filtered = False
    while i < len(args):
        token = args[i].value
        if token in _FIND_ACTIONS_EXEC:
            end = i + 1
            while end < len(args) and args[end].value not in (";", "+"):
                end += 1
            inner = args[i + 1:end]
            batch = end < len(args) and args[end].value == "+"
            out.append(ask(f"find {token} runs a command on each file"))
            for start in starts:
                item = start if not filtered else _child(start)
                argv = [Word(w.value.replace("{}", item.value), w.raw, w.params + item.params, w.subs)
                        if "{}" in w.value else w for w in inner]
                if argv:
                    env.sub_command(argv, inv.cwds, batch, f"find {token}")
            i = end + 1
            continue
        if token == "-delete":
            out.append(ws_write("find -delete deletes files", destructive=True))
            for start in starts:
                out += judge_delete(env, start if not filtered else _child(start), inv.cwds, recursive=True)
        elif token in _FIND_WRITE and i + 1 < len(args):
            out += judge_write(env, args[i + 1], inv.cwds)
            i += 1
        elif token.startswith("-") and token not in _FIND_NOT_FILTERS:
            filtered = True
        i += 1
    return out


def _child(start: Word) -> Word:
    """A placeholder for "some file under ``start``" (find with filters skips ``start`` itself)."""
    value = start.value.rstrip("/") + "/{}"
    return Word(value, value, start.params, start.subs)


def _fd(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    for i, word in enumerate(inv.args):
        if word.value in ("-x", "--exec", "-X", "--exec-batch") or re.fullmatch(r"-[a-zA-Z]*[xX]", word.value):
            inner = inv.args[i + 1:]
            if inner and inner[-1].value == ";":
                inner = inner[:-1]
            if inner:
                env.sub_command(inner, inv.cwds, True, f"fd {word.value}")
            return [ask(f"fd {word.value} runs a command on each file")]
        if word.value.startswith(("--exec=", "--exec-batch=")):
            return [ask("fd --exec runs a command on each file")]
    return [allow("fd only lists files")]


# -- sed ---------------------------------------------------------------------------------------

_SED_SIMPLE = set("pdPDnNgGhHxzl=")


def _skip_delimited(script: str, i: int, delim: str) -> int:
    """Index just past the next unescaped ``delim`` at or after ``i`` (-1 if none)."""
    while i < len(script):
        ch = script[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "\n":
            return -1
        if ch == delim:
            return i + 1
        i += 1
    return -1


def _sed_address(script: str, i: int) -> int:
    """Skip one address (number, $, /re/, \\cREc, first~step); -1 when malformed."""
    if i < len(script) and script[i].isdigit():
        while i < len(script) and (script[i].isdigit() or script[i] == "~"):
            i += 1
        return i
    if i < len(script) and script[i] == "$":
        return i + 1
    if i < len(script) and script[i] in "/\\":
        if script[i] == "\\":
            if i + 1 >= len(script):
                return -1
            delim, i = script[i + 1], i + 2
        else:
            delim, i = "/", i + 1
        end = _skip_delimited(script, i, delim)
        if end < 0:
            return -1
        while end < len(script) and script[end] in "IM":
            end += 1
        return end
    return i


def sed_script_is_read_only(script: str) -> bool:
    """True only for scripts made of print/delete/substitute commands without e/w/r flags.

    Anything else (a, i, c, r, w, e, labels, unusual syntax) is "not clearly safe" → False.
    """
    i = 0
    depth = 0
    n = len(script)
    while i < n:
        while i < n and script[i] in " \t\n;":
            i += 1
        if i >= n:
            break
        if script[i] == "#":
            while i < n and script[i] != "\n":
                i += 1
            continue
        if script[i] == "}":
            depth -= 1
            i += 1
            continue
        start = i
        i = _sed_address(script, i)
        if i < 0:
            return False
        if i > start and i < n and script[i] == ",":
            i += 1
            if i < n and script[i] in "+~":
                i += 1
            i = _sed_address(script, i)
            if i < 0:
                return False
        while i < n and script[i] in " \t!":
            i += 1
        if i >= n:
            return False
        cmd = script[i]
        i += 1
        if cmd == "{":
            depth += 1
            continue
        if cmd in _SED_SIMPLE:
            if cmd in "lqQ":
                while i < n and script[i].isdigit():
                    i += 1
        elif cmd in "qQ":
            while i < n and script[i].isdigit():
                i += 1
        elif cmd in "sy":
            if i >= n or script[i] in "\\\n":
                return False
            delim = script[i]
            i = _skip_delimited(script, i + 1, delim)
            if i < 0:
                return False
            i = _skip_delimited(script, i, delim)
            if i < 0:
                return False
            flags_start = i
            while i < n and script[i] not in " \t\n;}":
                i += 1
            if cmd == "y" and i > flags_start or not re.fullmatch(r"[gpiImM0-9]*", script[flags_start:i]):
                return False
        else:
            return False                  # e, w, W, r, R, a, i, c, b, t, :label, v, F ...
        while i < n and script[i] in " \t":
            i += 1
        if i < n and script[i] not in ";\n}":
            return False
    return depth == 0


def _sed(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    scripts: list[Word] = []
    operands: list[Word] = []
    in_place = False
    args = inv.args
    i = 0
    while i < len(args):
        text = args[i].value
        if text == "--":
            operands.extend(args[i + 1:])
            break
        if text in ("-e", "--expression") and i + 1 < len(args):
            scripts.append(args[i + 1])
            i += 2
            continue
        if text.startswith("--expression="):
            scripts.append(Word(text.split("=", 1)[1], text, args[i].params, args[i].subs))
        elif text.startswith(("-f", "--file")):
            return [ask("sed -f runs a script file")]
        elif text.startswith(("--in-place", "-i")) or (re.fullmatch(r"-[nEsuzr]+i.*", text) is not None):
            in_place = True
        elif text in ("-n", "--quiet", "--silent", "-E", "-r", "--regexp-extended", "-s", "--separate", "-u",
                      "--unbuffered", "-z", "--null-data", "--posix", "--debug", "--sandbox", "-b", "--binary",
                      "--follow-symlinks") or re.fullmatch(r"-[nEsuzr]+", text):
            pass
        elif re.fullmatch(r"-[nEsuzr]*e", text) and i + 1 < len(args):
            scripts.append(args[i + 1])
            i += 1
        elif text.startswith("-") and text != "-":
            return [ask(f"sed option {text!r} is not understood")]
        else:
            operands.append(args[i])
        i += 1
    if not scripts and operands:
        scripts, operands = operands[:1], operands[1:]
    out: list[Finding] = []
    if in_place:
        out.append(ws_write("sed -i edits files in place", destructive=True))
        for word in operands:
            out += judge_write(env, word, inv.cwds)
    for script in scripts:
        if not script.literal:
            out.append(ask("sed script built at run time"))
        elif not sed_script_is_read_only(script.value):
            out.append(ask(f"sed script {script.value!r} is not clearly read-only (e, w, r, a/i/c ...)"))
    return out or [allow("sed prints text")]


# -- awk, rg -------------------------------------------------------------------------------------

def _awk(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    parsed = options("awk", inv.args)
    if has(parsed, "-f", "-E", "-i", "-l", "--file", "--include", "--load", "--exec"):
        return [ask("awk loads a program or library from a file")]
    programs = values_of(parsed, "-e", "--source") or parsed.operands[:1]
    for program in programs:
        if not program.literal:
            return [ask("awk program built at run time")]
        code = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', program.value)     # text in strings is not code
        if re.search(r"system\s*\(|[|>]|@|getline|ARGV|ENVIRON", code):
            return [ask("awk program may run commands, write or read other files (system, |, >, getline)")]
    return [allow("awk prints text")]


def _rg(inv: Invocation, _env: JudgeEnv) -> list[Finding]:
    parsed = options("rg", inv.args)
    if has(parsed, "--pre", "--pre-glob", "--hostname-bin"):
        return [ask("rg --pre runs a program on every file it searches")]
    if has(parsed, "-z", "--search-zip"):
        return [ask("rg -z runs the decompression programs it finds on PATH")]
    return [allow("rg only reads")]


# -- archives ----------------------------------------------------------------------------------

_TAR_EXEC = ("--to-command", "-I", "--use-compress-program", "--checkpoint-action", "--info-script", "-F",
             "--new-volume-script", "--rsh-command", "--rmt-command")


def _tar(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    args = list(inv.args)
    if args and not args[0].value.startswith("-"):
        args[0] = Word("-" + args[0].value, args[0].raw, args[0].params, args[0].subs)
    parsed = options("tar", args)
    if any(opt.startswith(_TAR_EXEC) for opt, _ in parsed.options):
        return [ask("tar option runs a program")]
    if has(parsed, "-t", "--list") and not has(parsed, "-x", "-c", "-r", "-u", "--extract", "--create"):
        return [allow("tar lists an archive")]
    if has(parsed, "-c", "--create", "-r", "-u", "--append", "--update"):
        # an archive of files: a workspace write of the archive (what it reads is judged with every command)
        out = [ws_write("tar writes an archive", destructive=True)]
        for word in values_of(parsed, "-f", "--file"):
            if word.value != "-":
                out += judge_write(env, word, inv.cwds)
    else:
        # what an archive unpacks (.envrc, a hook, ../x) is not visible here
        out = [ask("tar writes the archive's files, which the checker cannot see", destructive=True)]
        for word in values_of(parsed, "-C", "--directory") or [Word(".", ".")]:
            out += judge_write(env, word, inv.cwds, verb="extracts into")
    return out


def _unzip(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    parsed = options("unzip", inv.args)
    if has(parsed, "-l", "-v", "-t", "-Z") and not values_of(parsed, "-d"):
        return [allow("unzip lists an archive")]
    out = [ask("unzip writes files", destructive=True)]
    for word in values_of(parsed, "-d") or [Word(".", ".")]:
        out += judge_write(env, word, inv.cwds, verb="extracts into")
    return out


def _zip(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    """``zip [opts] ARCHIVE FILES``: a workspace write of the archive."""
    operands = options("zip", inv.args).operands
    out = [ws_write("zip writes an archive", destructive=True)]
    for word in operands[:1]:
        out += judge_write(env, word, inv.cwds)
    return out


def _compress(inv: Invocation, env: JudgeEnv) -> list[Finding]:
    parsed = options(inv.name, inv.args)
    operands = parsed.operands
    if inv.name.endswith("cat") or has(parsed, "-c", "--stdout", "-l", "--list", "-t", "--test") or not operands:
        return [allow(f"{inv.name} writes to stdout")]
    out = [ws_write(f"{inv.name} replaces files", destructive=True)]
    for word in operands:
        out += judge_write(env, word, inv.cwds)
    return out


JUDGES: dict[str, Judge] = {
    "find": _find, "fd": _fd, "fdfind": _fd, "sed": _sed, "gsed": _sed,
    "awk": _awk, "gawk": _awk, "mawk": _awk, "nawk": _awk, "rg": _rg,
    "tar": _tar, "unzip": _unzip, "zip": _zip,
}
JUDGES.update({name: _compress for name in ("gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd",
                                            "unzstd", "zcat", "bzcat", "xzcat", "zstdcat")})
