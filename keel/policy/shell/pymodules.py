"""``python -m MODULE`` for standard-library modules that write files or serve: judged by what they
write (``python -m zipfile -c /tmp/x.zip``, ``-m tarfile -e a.tar /tmp/out``, ``-m gzip FILE``,
``-m cProfile -o FILE``, ``-m trace -C DIR``, ``-m json.tool IN OUT``, ``-m venv DIR``) and by
whether they listen on the network (``-m http.server``, ``-m xmlrpc.server``, ``-m smtpd``).
Command-line interfaces as documented at https://docs.python.org/3/library/ (each module's
"Command-line interface" section).
"""

from __future__ import annotations

from keel.policy.shell.commands import (
    Finding,
    Invocation,
    JudgeEnv,
    allow,
    ask,
    judge_write,
    runs_code,
    ws_write,
)
from keel.policy.shell.parse import Word

# Modules that listen on a port: a server the model starts is network access and may outlive the call.
SERVERS = frozenset({"http.server", "xmlrpc.server", "smtpd", "aiosmtpd", "wsgiref.simple_server", "socketserver"})
WRITERS = frozenset({"zipfile", "tarfile", "gzip", "cProfile", "profile", "trace", "json.tool", "venv"})


def _options(rest: list[Word], with_value: set[str]) -> tuple[dict[str, list[Word]], list[Word]]:
    """argparse-style: ``-o FILE``, ``-oFILE``, ``--outfile=FILE``; operands after them."""
    options: dict[str, list[Word]] = {}
    operands: list[Word] = []
    i = 0
    while i < len(rest):
        word, text = rest[i], rest[i].value
        if operands or not text.startswith("-") or text == "-":
            operands.append(word)
        elif text == "--":
            operands += rest[i + 1:]
            break
        else:
            name, eq, value = text.partition("=")
            if name in with_value and not eq and i + 1 < len(rest):
                options.setdefault(name, []).append(rest[i + 1])
                i += 1
            elif name in with_value and eq:
                options.setdefault(name, []).append(Word(value, value, word.params, word.subs))
            elif not name.startswith("--") and name[:2] in with_value and len(name) > 2:
                options.setdefault(name[:2], []).append(Word(text[2:], text[2:], word.params, word.subs))
            else:
                options.setdefault(name, [])
        i += 1
    return options, operands


def _writes(env: JudgeEnv, inv: Invocation, targets: list[Word], what: str) -> list[Finding]:
    out = [ws_write(what)]
    for word in targets:
        out += judge_write(env, word, inv.cwds, verb=what.split(" writes")[0] + " writes")
    return out


def judge_module(module: str, rest: list[Word], inv: Invocation, env: JudgeEnv) -> list[Finding] | None:
    """Findings for ``python -m module rest``; None when this module is not one of these."""
    if module in SERVERS or module.startswith("http.server"):
        return [ask(f"python -m {module} starts a server that listens on the network", network=True, lift=None)]
    if module not in WRITERS:
        return None
    label = f"python -m {module}"
    if module in ("zipfile", "tarfile"):
        options, operands = _options(rest, {"-c", "--create", "-e", "--extract", "-l", "--list", "-t", "--test"})
        created = options.get("-c", []) + options.get("--create", [])
        extracted = options.get("-e", []) + options.get("--extract", [])
        if created:
            return _writes(env, inv, created, f"{label} writes an archive")
        if extracted:
            into = operands[:1] or [Word(".", ".")]
            return _writes(env, inv, into, f"{label} writes the archive's files")
        if any(k in options for k in ("-l", "--list", "-t", "--test")):
            return [allow(f"{label} lists or tests an archive")]
        return [ask(f"{label} with options not known to be read-only")]
    if module == "gzip":
        options, operands = _options(rest, set())
        unpack = "-d" in options or "--decompress" in options
        targets = [Word(w.value[:-3] if unpack and w.value.endswith(".gz") else w.value + ".gz", w.raw, w.params, w.subs)
                   for w in operands]
        # gzip compresses in place: the source file is replaced too
        return _writes(env, inv, targets + operands, f"{label} writes compressed files") if operands else \
            [allow(f"{label} filters stdin to stdout")]
    if module in ("cProfile", "profile"):
        options, _ = _options(rest, {"-o", "--outfile", "-s", "--sort", "-m"})
        return _writes(env, inv, options.get("-o", []) + options.get("--outfile", []),
                       f"{label} writes a profile") + [runs_code(f"{label} runs a program")]
    if module == "trace":
        options, _ = _options(rest, {"-C", "--coverdir", "-f", "--file", "--ignore-module", "--ignore-dir"})
        targets = [w for k in ("-C", "--coverdir", "-f", "--file") for w in options.get(k, [])]
        return _writes(env, inv, targets, f"{label} writes coverage") + [runs_code(f"{label} runs a program")]
    if module == "json.tool":
        _, operands = _options(rest, {"--indent"})
        return _writes(env, inv, operands[1:2], f"{label} writes JSON") if len(operands) > 1 else \
            [allow(f"{label} formats JSON")]
    _, operands = _options(rest, {"--prompt"})                       # venv DIR...
    if not operands:
        return [ask(f"{label} without a directory")]
    return _writes(env, inv, operands, f"{label} writes a virtual environment")
