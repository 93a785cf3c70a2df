"""Text that looks like a credential: what the ``remember`` tool refuses to write into AGENTS.md.

AGENTS.md is committed, shared, and sent to the model at the start of every later session, so a key
written there leaks three ways. The patterns are the well-known token shapes (their issuers made
them recognisable on purpose) plus ``password = value``-style assignments; a value that only names
where the secret lives (``$DB_PASSWORD``, ``os.environ[...]``, ``<token>``) is not a secret.
"""

from __future__ import annotations

import re

# (what it is, pattern); checked in order, the first match names the refusal.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("an Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("an OpenAI-style API key", re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}")),
    ("a Stripe key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("an npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("a PyPI token", re.compile(r"\bpypi-[A-Za-z0-9_-]{50,}")),
    ("a JSON Web Token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")),
    ("a bearer token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*")),
    # The scheme is bounded: unbounded, each of the many starts in "a-a-a-…" scanned to the end (issue 22).
    ("a password in a URL", re.compile(r"\b[a-z][a-z0-9+.-]{0,63}://[^\s/:@]+:[^\s/@]{3,}@", re.IGNORECASE)),
)

# `password = hunter22`, `API_KEY: "abc123..."`, `--token=abc...`, `secret is s3cr3t!`
# The name starts where a run of name characters starts (a match inside a run implies one from its
# start) and is bounded: otherwise every position of a long word rescanned the word, for each keyword in
# it, and 20,000 characters took seconds (keel issue 22).
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<name>[A-Za-z0-9_-]{0,64}(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key|"
    r"private[_-]?key|client[_-]?secret|auth[_-]?key|credentials?)[A-Za-z0-9_-]{0,64})"
    r"[\"']?\s*(?::|=|\bis\b)\s*(?P<value>\"[^\"]+\"|'[^']+'|[^\s,;]+)",
    re.IGNORECASE)
# Values that say where a secret lives, not what it is.
_REFERENCE = re.compile(r"^(?:\$|%|<|\{|\[|`|os\.|process\.env|env\.|getenv|environ|secrets\.|vault:|none$|null$|"
                        r"true$|false$|required$|optional$|set$|unset$|empty$|x+$|\*+$|\.\.\.|…)", re.IGNORECASE)
_MIN_VALUE = 6


def secret_kind(text: str) -> str | None:
    """What secret ``text`` seems to contain ("an AWS access key id", "a password"), or None."""
    for kind, pattern in SECRET_PATTERNS:
        if pattern.search(text):
            return kind
    for m in _ASSIGNMENT.finditer(text):
        value = m.group("value").strip("\"'").rstrip(".")
        if len(value) >= _MIN_VALUE and not _REFERENCE.match(value) and _has_secret_shape(value):
            return f"a value assigned to {m.group('name')!r}"
    return None


def _has_secret_shape(value: str) -> bool:
    """Words of prose ("the token is stored in the keyring") are not secrets; a secret mixes letters
    with digits or symbols, or is one long unbroken run."""
    if value.isalpha() and value.islower() and len(value) < 16:
        return False
    return any(c.isdigit() for c in value) or any(not c.isalnum() for c in value) or len(value) >= 16
