"""A strict reader of git config files, for keel.policy.runlater: which keys a change touched.

It accepts only the plain forms git itself writes (``[section]``, ``[section "sub"]``,
``key = value``, comments); anything else makes the whole file unreadable here, and the caller
then treats the change as unsafe. So git can never read a key this reader missed.
"""

from __future__ import annotations

import fnmatch
import re
from collections import defaultdict

# Keys that cannot make git run a program; every other key (core.fsmonitor, core.hooksPath, *.textconv,
# filter.*, alias.*, include.*, credential.*, ...) counts as one that can.
SAFE_CONFIG_KEYS = (
    "user.*", "author.*", "committer.*", "init.defaultbranch", "core.repositoryformatversion", "core.filemode",
    "core.bare", "core.logallrefupdates", "core.ignorecase", "core.precomposeunicode", "core.symlinks",
    "core.autocrlf", "core.eol", "core.safecrlf", "core.quotepath", "core.abbrev", "core.compression",
    "extensions.objectformat", "extensions.refstorage", "extensions.worktreeconfig", "branch.*.remote",
    "branch.*.merge", "branch.*.rebase", "branch.*.pushremote", "branch.*.description", "remote.*.url",
    "remote.*.pushurl", "remote.*.fetch", "remote.*.push", "remote.*.tagopt", "remote.*.prune", "remote.*.mirror",
    "submodule.*.url", "submodule.*.active", "pull.rebase", "pull.ff", "push.default", "push.autosetupremote",
    "merge.ff", "merge.conflictstyle", "fetch.prune", "rerere.enabled", "gc.auto", "color.ui", "advice.*",
)

_SECTION = re.compile(r'[ \t]*\[([A-Za-z0-9.-]+)(?:[ \t]+"((?:[^"\\\n]|\\.)*)")?\][ \t]*(?:[#;].*)?')
_KEY = re.compile(r"[ \t]*([A-Za-z][A-Za-z0-9-]*)[ \t]*(?:=(.*))?")
_BLANK = re.compile(r"[ \t]*(?:[#;].*)?")
_UNESCAPE = re.compile(r"\\(.)")


def entries(data: bytes) -> dict[str, list[str]] | None:
    """Each full key name (section and key lower-cased, a quoted subsection as written) with its raw
    values in order; None when a line is not in a form this reader is sure git reads the same way."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\x00" in text:
        return None
    found: dict[str, list[str]] = defaultdict(list)
    section: str | None = None
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if _BLANK.fullmatch(line):
            continue
        if match := _SECTION.fullmatch(line):
            name, sub = match.group(1).lower(), match.group(2)
            section = name if sub is None else name + "." + _UNESCAPE.sub(r"\1", sub)
            continue
        match = _KEY.fullmatch(line)
        if match is None or section is None:
            return None
        value = (match.group(2) or "").strip()
        if value.endswith("\\"):
            return None                 # a continuation line: the next line is part of the value
        found[f"{section}.{match.group(1).lower()}"].append(value)
    return dict(found)


def unsafe_changes(before: bytes, after: bytes) -> list[str]:
    """The keys whose values differ between the two files and that are not known to be unable to
    run code (``SAFE_CONFIG_KEYS``); a file this reader cannot read is one unsafe change."""
    old, new = entries(before), entries(after)
    if new is None or old is None:
        return ["lines keel cannot check"]
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return [k for k in changed if not any(fnmatch.fnmatchcase(k, pattern) for pattern in SAFE_CONFIG_KEYS)]
