"""Secret files named inside a program given on the command line (``python3 -c``, ``node -e``,
``perl -e``, a here-document fed to an interpreter): its string literals are paths like any argument.

Why: on the Landlock tier (and with no tier) a workspace's ``.env`` stays readable by running code,
and ``python3 -c "print(open('.env').read())"`` ran unasked where ``cat .env`` asks (issue 35). The
literal names the file as surely as an argument would, so it gets the same answer: a secret file in
the workspace asks (a ``read(...)`` rule may lift it), credentials outside it are refused. A name
built at run time (``'.e' + 'nv'``) is not seen: bubblewrap hides the file from it instead.
"""

from __future__ import annotations

import re

from keel.policy.shell.commands import Finding, Invocation, ask, deny
from keel.policy.shell.parse import SimpleCommand, Word
from keel.policy.shell.paths import PathJudge

# A quoted string in code of any of the usual languages ('…', "…", `…`), without escapes inside.
_LITERAL = re.compile(r"""(['"`])([^'"`\n\\]{1,400})\1""")
MAX_LITERALS = 200


def code_words(inv: Invocation, cmd: SimpleCommand) -> list[Word]:
    """The words that may hold a program: the arguments and any here-document or here-string."""
    words = list(inv.args)
    for redirect in cmd.redirects:
        if redirect.op in ("<<", "<<-") and redirect.heredoc:
            words.append(Word(redirect.heredoc, redirect.heredoc))
        elif redirect.op == "<<<" and redirect.target is not None:
            words.append(redirect.target)
    return words


def inline_secrets(paths: PathJudge, inv: Invocation, cmd: SimpleCommand) -> list[Finding]:
    """Findings for the secret files the literals of an interpreter's inline program name."""
    out: list[Finding] = []
    seen = 0
    for word in code_words(inv, cmd):
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
    return out
