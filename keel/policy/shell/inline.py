"""Secret files named inside a program given on the command line (``python3 -c``, ``node -e``,
``perl -e``, a here-document fed to an interpreter): its string literals are paths like any argument.

Why: on the Landlock tier (and with no tier) a workspace's ``.env`` stays readable by running code,
and ``python3 -c "print(open('.env').read())"`` ran unasked where ``cat .env`` asks (issue 35). The
literal names the file as surely as an argument would, so it gets the same answer: a secret file in
the workspace asks (a ``read(...)`` rule may lift it), credentials outside it are refused. A name
built at run time (``'.e' + 'nv'``) is not seen: bubblewrap hides the file from it instead.

The same literals may name what the program deletes or truncates: ``python3 -c
"shutil.rmtree('node_modules')"`` removed a git-ignored tree the snapshot does not hold, and keel undo
could not bring it back. A program that calls a deleting function asks, as ``rm -rf node_modules``
does, for each path it names that the snapshot could not take first (keel.trace.shellwatch.Holdings);
a path built at run time is not seen, and is said lost afterwards.
"""

from __future__ import annotations

import re
from typing import Any

from keel.policy.shell.commands import Finding, Invocation, ask, deny
from keel.policy.shell.parse import SimpleCommand, Word
from keel.policy.shell.paths import PathJudge

# A quoted string in code of any of the usual languages ('…', "…", `…`), without escapes inside.
_LITERAL = re.compile(r"""(['"`])([^'"`\n\\]{1,400})\1""")
MAX_LITERALS = 200
# Calls that delete or truncate, in Python, Node, Perl and Ruby: rmtree, os.remove/unlink/rmdir,
# Path.unlink, fs.rmSync/unlinkSync/rm, truncate, an open for writing ('w' mode, File.write).
_DELETES = re.compile(r"\b(?:rmtree|remove|removedirs|unlink(?:Sync)?|rmdir(?:Sync)?|rm(?:Sync)?|truncate(?:Sync)?|"
                      r"writeFileSync|write_text|write_bytes)\s*\(|\bopen\s*\([^)]*,\s*['\"][wx]")


def code_words(inv: Invocation, cmd: SimpleCommand) -> list[Word]:
    """The words that may hold a program: the arguments and any here-document or here-string."""
    words = list(inv.args)
    for redirect in cmd.redirects:
        if redirect.op in ("<<", "<<-") and redirect.heredoc:
            words.append(Word(redirect.heredoc, redirect.heredoc))
        elif redirect.op == "<<<" and redirect.target is not None:
            words.append(redirect.target)
    return words


def inline_secrets(paths: PathJudge, inv: Invocation, cmd: SimpleCommand, snapshot: Any = None) -> list[Finding]:
    """Findings for the secret files the literals of an interpreter's inline program name, and, when the
    program deletes or truncates, for what it names that the snapshot (``snapshot.unheld``) cannot hold."""
    out: list[Finding] = []
    seen = 0
    words = code_words(inv, cmd)
    check = getattr(snapshot, "unheld", None)
    deletes = check is not None and any(_DELETES.search(w.value) for w in words)
    for word in words:
        for m in _LITERAL.finditer(word.value):
            seen += 1
            if seen > MAX_LITERALS:
                return out + [ask(f"{inv.name}'s program names too many strings to check", lift=None)]
            literal = m.group(2)
            for place in paths.places(Word(literal, literal), inv.cwds):
                if (reason := paths.secret_reason(place)) is not None:
                    out.append(deny(f"its program {reason}", lift=None, secret=True))
                elif (path := paths.secret_file(place)) is not None and place.where != "unknown":
                    out.append(ask(f"its program reads the secret file {path.name}", lift="read", path=path,
                                   secret=True))
                if deletes and check is not None and place.real is not None and place.where in ("inside", "root") \
                        and (why := check(place.real, True)) is not None:
                    out.append(ask(f"its program deletes or rewrites {literal!r}: {why}", destructive=True))
    return out
