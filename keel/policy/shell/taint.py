"""Variables that hold run-time input, evaluated later as arithmetic.

``read n; echo $((n))``: bash evaluates n's *value* as an arithmetic expression, and an array
subscript in it (``a[$(cmd)]``) runs the command. A variable filled by ``read``, ``mapfile`` or
``printf -v`` is "tainted"; naming it in ``$(( ))``, ``(( ))``, ``let``, ``[[ … -eq … ]]``,
``declare -i`` or an array subscript asks. (Loop variables over command output are not tracked.)
"""

from __future__ import annotations

import re
from typing import Any

from keel.policy.shell.parse import Word


class ArithmeticTaint:
    """Mixin for the walker: ``self.tainted`` and ``self.issue`` come from it."""

    tainted: set[str]

    def issue(self, decision: str, reason: str, node: Any) -> None:
        raise NotImplementedError

    def _tainted_arith(self, raw: str, node: Any, whole: bool = False) -> None:
        """Ask when a variable holding run-time input is evaluated as arithmetic: ``read n;
        echo $((n))`` runs a command hidden in n's value as an array subscript."""
        for name in self.tainted:
            pattern = rf"\b{re.escape(name)}\b" if whole else rf"(\$\(\(|\$\[|\[)[^\]]*\b{re.escape(name)}\b"
            if re.search(pattern, raw):
                self.issue("ask", f"{name!r} holds input read at run time and is evaluated as arithmetic here "
                                  "(bash runs commands in array subscripts inside it)", node)
                return

    def _taint(self, words: list[Word]) -> None:
        values = [w.value for w in words]
        name = values[0] if values else ""
        if name in ("read", "mapfile", "readarray"):
            valued = {"-a", "-d", "-n", "-N", "-p", "-t", "-u", "-i", "-C", "-c", "-O", "-s"}
            names: list[str] = []
            skip = False
            for i, value in enumerate(values[1:], start=1):
                if skip:
                    skip = False
                    if values[i - 1] == "-a":
                        names.append(value)
                elif value in valued:
                    skip = True
                elif not value.startswith("-"):
                    names.append(value)
            self.tainted.update(names or (["REPLY"] if name == "read" else ["MAPFILE"]))
        elif name == "printf" and "-v" in values[:-1]:
            self.tainted.add(values[values.index("-v") + 1])
