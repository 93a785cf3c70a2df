"""Linear time on text from outside (keel issue 22): each function of tests/linear_text_cases.py on
each pathological input at 100 kB and at 1 MB; prints the worst input per function and the ratio of
the two times (about 10 means linear, about 100 quadratic). Then the old self-check tokenizer regex
against the new one on one long word (the measured hang: 20,000 characters took 5 s).
Run: ``python bench/linear_text.py`` (a few minutes on a busy machine)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from linear_text_cases import FUNCTIONS, pathological  # noqa: E402

from keel.core.request.names import identifiers_named  # noqa: E402

# keel/verify/selfcheck.py before issue 22: searched across the text, quadratic inside one word.
OLD_CODE_WORD = re.compile(r"\b([A-Za-z_]*[a-z][A-Za-z0-9]*_[A-Za-z0-9_]+|[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*)\b")


def task_names(text: str) -> frozenset[str]:
    """The task's identifiers, as the self-check reads them (keel.core.request since the one parsed request)."""
    return identifiers_named(text, ())


def timed(function, text: str) -> float:
    started = time.perf_counter()
    function(text)
    return time.perf_counter() - started


def main() -> None:
    small, large = pathological(100_000), pathological(1_000_000)
    print(f"{'function':46s} {'worst input':22s} {'100 kB':>8s} {'1 MB':>8s} {'ratio':>6s}")
    for name, function in FUNCTIONS.items():
        rows = [(timed(function, large[kind]), timed(function, small[kind]), kind) for kind in small]
        big, little, kind = max(rows)
        print(f"{name:46s} {kind:22s} {little:8.3f} {big:8.3f} {big / max(little, 1e-4):6.1f}", flush=True)
    print("\nself-check task tokenizer, one long word:")
    for n in (5_000, 10_000, 20_000):
        word = "a" * n
        old, new = timed(OLD_CODE_WORD.findall, word), timed(task_names, word)
        print(f"  {n:>7,} chars: old regex {old:7.3f} s   new tokenizer {new:7.4f} s")
    print(f"  1,000,000 chars: new tokenizer {timed(task_names, 'a' * 1_000_000):.3f} s")


if __name__ == "__main__":
    main()
