"""B1 edit robustness: where do drifted search-and-replace edits land?

Cases are real blocks of this interpreter's stdlib, each with a one-line edit (change, insert or
delete) and one drift class applied to old_text and new_text alike. Three matchers run on the same
bytes: keel (``keel.tools.edit_match`` + ``textfile``), aider 0.86.2's ``replace_most_similar_chunk``
(downloaded with ``pip download --no-deps``; only its top-level defs are executed, none of aider's
imports), and a strict exact-and-unique rule (OpenHands / Claude Code).

Drift classes: none; dedent / extra_indent (old_text shifted uniformly); tabs (tabs for the file's
spaces) and spaces_for_tabs (a tab-indented file, 4 spaces per tab from the model); trailing_ws;
crlf_old (CRLF in old_text and new_text); crlf_file (the file is CRLF, the model sends LF); elided
(the middle of old_text replaced by a ``...`` line); quotes (straight quotes sent as curly ones);
blank_more / blank_less (one inner blank line more / fewer than the file, away from the edit);
unicode_spaces (no-break, thin or ideographic spaces for some of the file's plain ones, in old_text
and in new_text's changed lines: the correct file has plain spaces);
duplicate (a 2-line snippet found twice, the second one meant); near_duplicate (a copy of the block,
4 columns deeper, just above it, and old_text dedented by 4); already_applied (the file already has
the edit); stale (another line of the block changed since the model read it). Refusing is the
correct outcome for already_applied and stale; nothing can be correct for the two duplicate classes.

Outcome per case: correct = resulting bytes equal the expected bytes; wrong = the file changed but
is not the expected file; refused = unchanged when a change was expected. hint% = share of a
matcher's refusals whose message names the region holding the intended span.

Usage: python bench/edit_drift.py [--cases 150] [--seed 20240611]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import math
import os
import random
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from keel.tools.edit_match import find_edit  # noqa: E402
from keel.tools.textfile import TextFile  # noqa: E402

AIDER_VERSION = "0.86.2"
CLASSES = ("none", "dedent", "extra_indent", "tabs", "spaces_for_tabs", "trailing_ws", "crlf_old", "crlf_file", "elided",
           "quotes", "blank_more", "blank_less", "unicode_spaces", "duplicate", "near_duplicate", "already_applied",
           "stale")
ODD_SPACES = ("\u00a0", "\u2009", "\u202f", "\u3000", "\u2002")
AMBIGUOUS_CLASS = "duplicate"
_EOL = re.compile(r"\r\n|\r|\n")


@dataclass
class Case:
    cls: str
    data: bytes            # the file as it is on disk when the edit arrives
    old: str
    new: str
    expected: bytes        # the file after a correct edit (== data when refusing is right)
    span: tuple[int, int]  # 1-based lines of the intended region in the file


@dataclass
class Outcome:
    result: bytes | None   # None: the matcher declined
    hint_ok: bool = False


# ---- corpus and drift -------------------------------------------------------------------------------

def corpus(rng: random.Random) -> list[list[str]]:
    root = sysconfig.get_paths()["stdlib"]
    paths = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "__pycache__", "test", "tests"))
        paths += [os.path.join(d, f) for f in sorted(files) if f.endswith(".py")]
    texts = []
    for p in paths:
        data = Path(p).read_bytes()
        if 2_000 <= len(data) <= 60_000 and b"\r" not in data:
            try:
                texts.append(data.decode("utf-8").split("\n"))
            except UnicodeDecodeError:
                continue
    rng.shuffle(texts)
    return texts


def dedent(lines: list[str], n: int) -> list[str]:
    return [x[n:] if x.strip() else x for x in lines]


def common_indent(lines: list[str]) -> int:
    return min(len(x) - len(x.lstrip(" ")) for x in lines if x.strip())


def tabify(line: str) -> str:
    n = len(line) - len(line.lstrip(" "))
    return "\t" * (n // 4) + " " * (n % 4) + line[n:]


def curl(text: str) -> str:
    out, prev = [], " "
    for ch in text:
        if ch in "'\"":
            opening = prev.isspace() or prev in "([{=,"
            ch = {("'", True): "‘", ("'", False): "’", ('"', True): "“", ('"', False): "”"}[(ch, opening)]
        out.append(ch)
        prev = ch
    return "".join(out)


def one_line_edit(rng: random.Random, block: list[str], choices: list[int]) -> list[str]:
    j = rng.choice(choices)
    kind = rng.choice(("change", "insert", "delete")) if 0 < j < len(block) - 1 else "change"
    indent = block[j][: len(block[j]) - len(block[j].lstrip())]
    if kind == "change":
        return [*block[:j], block[j] + "  # edited", *block[j + 1:]]
    if kind == "insert":
        return [*block[:j + 1], indent + "keel_marker = 1", *block[j + 1:]]
    return [*block[:j], *block[j + 1:]]


def make_case(cls: str, rng: random.Random, lines: list[str]) -> Case | None:
    text = "\n".join(lines)
    if cls == AMBIGUOUS_CLASS:
        return duplicate_case(rng, lines)
    k = rng.randint(8, 12) if cls == "elided" else rng.randint(6, 10)
    s = rng.randrange(0, max(1, len(lines) - k))
    block = lines[s:s + k]
    if len(block) < k or not block[0].strip() or not block[-1].strip():
        return None
    old_text = "\n".join(block) + "\n"
    if text.count(old_text) != 1:
        return None
    nonblank = [j for j, x in enumerate(block) if x.strip()]
    kept = [j for j in nonblank if j < 2 or j >= k - 2]
    new_block = one_line_edit(rng, block, kept if cls == "elided" else nonblank)
    expected = "\n".join([*lines[:s], *new_block, *lines[s + k:]])
    old, new, data = block, new_block, text
    span = (s + 1, s + k)
    if cls in ("dedent", "extra_indent", "tabs", "spaces_for_tabs", "near_duplicate") and common_indent(block) < 4:
        return None
    if cls == "near_duplicate":
        # A copy of the block, 4 columns deeper, sits just above it; old_text is dedented by 4,
        # so it is as far from the copy as from the block it means.
        copy = [("    " + x) if x.strip() else x for x in block]
        data = "\n".join([*lines[:s], *copy, "", *lines[s:]])
        expected = "\n".join([*lines[:s], *copy, "", *new_block, *lines[s + k:]])
        old, new, span = dedent(old, 4), dedent(new, 4), (s + k + 2, s + 2 * k + 1)
    elif cls == "dedent":
        n = common_indent(block)
        old, new = dedent(old, n), dedent(new, n)
    elif cls == "extra_indent":
        old, new = [("    " + x) if x.strip() else x for x in old], [("    " + x) if x.strip() else x for x in new]
    elif cls == "tabs":
        old, new = [tabify(x) for x in old], [tabify(x) for x in new]
    elif cls == "spaces_for_tabs":   # the file is tab-indented; the model writes 4 spaces per tab
        data = "\n".join(tabify(x) for x in text.split("\n"))
        expected = "\n".join(tabify(x) for x in expected.split("\n"))
    elif cls == "trailing_ws":
        padded = {x for x in block if x.strip() and rng.random() < 0.5} or {block[0]}
        pad = " " * rng.randint(1, 3)
        old, new = [x + pad if x in padded else x for x in old], [x + pad if x in padded else x for x in new]
    elif cls == "elided":
        # Lines 3..k-2 are elided; the edit sits in the first two or the last two lines.
        marker = block[2][: len(block[2]) - len(block[2].lstrip())] + "..."
        if new_block[: k - 2] == block[: k - 2]:      # edit in the tail
            head, tail = new_block[:2], new_block[k - 2:]
        else:                                          # edit in the head; the tail is untouched
            head, tail = new_block[: len(new_block) - (k - 2)], new_block[-2:]
        old, new = [*block[:2], marker, *block[-2:]], [*head, marker, *tail]
    elif cls == "quotes":
        if not any(q in old_text for q in "'\""):
            return None
        old, new = [curl(x) for x in old], [curl(x) for x in new]
    elif cls in ("blank_more", "blank_less", "unicode_spaces"):
        drifted = drift_lines(cls, rng, block, new_block, text)
        if drifted is None:
            return None
        old, new = drifted
    elif cls == "already_applied":
        data, expected = expected, expected
        span = (s + 1, s + len(new_block))
    elif cls == "stale":
        others = [j for j in nonblank if block[j] == new_block[j]] if len(new_block) == k else []
        if not others:
            return None
        j = rng.choice(others)
        changed = [*lines[:s + j], lines[s + j] + "  # changed meanwhile", *lines[s + j + 1:]]
        data = expected = "\n".join(changed)
    old_s, new_s = "\n".join(old) + "\n", "\n".join(new) + "\n"
    if cls == "crlf_old":
        old_s, new_s = old_s.replace("\n", "\r\n"), new_s.replace("\n", "\r\n")
    eol = "\r\n" if cls == "crlf_file" else "\n"
    return Case(cls, data.replace("\n", eol).encode(), old_s, new_s, expected.replace("\n", eol).encode(), span)


def drift_lines(cls: str, rng: random.Random, block: list[str], new_block: list[str],
                text: str) -> tuple[list[str], list[str]] | None:
    """old and new for the blank-line and odd-space classes, or None when the block does not suit."""
    ops = difflib.SequenceMatcher(None, block, new_block, autojunk=False).get_opcodes()
    equal = [(i1, i2, j1) for tag, i1, i2, j1, _ in ops if tag == "equal"]
    if cls == "blank_more":    # an inner point with unchanged lines on both sides
        points = [(i, j1 + i - i1) for i1, i2, j1 in equal for i in range(max(i1, 1) + 1, i2)]
        if not points:
            return None
        i, j = rng.choice(points)
        return [*block[:i], "", *block[i:]], [*new_block[:j], "", *new_block[j:]]
    if cls == "blank_less":    # an inner blank line among unchanged lines
        points = [(i, j1 + i - i1) for i1, i2, j1 in equal for i in range(max(i1, 1), min(i2, len(block) - 1))
                  if not block[i].strip()]
        if not points:
            return None
        i, j = rng.choice(points)
        return [*block[:i], *block[i + 1:]], [*new_block[:j], *new_block[j + 1:]]
    odd = rng.choice(ODD_SPACES)
    if any(c in text for c in ODD_SPACES):
        return None

    def spaced(line: str) -> str:
        body = line.lstrip(" ")
        indent = line[: len(line) - len(body)]
        # An odd-space indent for some lines, odd spaces between the words for all chosen ones.
        return (indent.replace(" ", odd) if rng.random() < 0.3 else indent) + body.replace(" ", odd)

    chosen = {i for i, x in enumerate(block) if " " in x.strip() and rng.random() < 0.5}
    if not chosen:
        return None
    old = [spaced(x) if i in chosen else x for i, x in enumerate(block)]
    new: list[str] = []
    for tag, i1, i2, j1, j2 in ops:
        new += old[i1:i2] if tag == "equal" else [spaced(x) for x in new_block[j1:j2]]
    return old, new


def duplicate_case(rng: random.Random, lines: list[str]) -> Case | None:
    text = "\n".join(lines)
    seen: dict[tuple[str, str], list[int]] = {}
    for i in range(len(lines) - 1):
        a, b = lines[i], lines[i + 1]
        if a.strip() and b.strip() and len(a.strip() + b.strip()) >= 16:
            seen.setdefault((a, b), []).append(i)
    pairs = [(p, at) for p, at in seen.items() if len(at) == 2 and text.count(f"{p[0]}\n{p[1]}\n") == 2]
    if not pairs:
        return None
    (a, b), at = rng.choice(pairs)
    i = at[1]   # the intended copy is the second one
    expected = "\n".join([*lines[:i + 1], b + "  # edited", *lines[i + 2:]])
    return Case(AMBIGUOUS_CLASS, text.encode(), f"{a}\n{b}\n", f"{a}\n{b}  # edited\n", expected.encode(),
                (i + 1, i + 2))


# ---- the three matchers -----------------------------------------------------------------------------

def covers(region: tuple[int, int] | None, span: tuple[int, int]) -> bool:
    return region is not None and region[0] <= span[0] and region[1] >= span[1]


def run_keel(case: Case) -> Outcome:
    tf = TextFile.from_bytes(case.data)
    res = find_edit(tf.text, case.old, case.new)
    if res.ok:
        return Outcome(tf.with_replacements((r.start, r.end, r.text) for r in res.replacements).to_bytes())
    hint = (any(case.span[0] <= c <= case.span[1] for c in res.candidates) or covers(res.closest, case.span)
            or (res.already_applied_at is not None and case.span[0] <= res.already_applied_at <= case.span[1]))
    return Outcome(None, hint)


def run_strict(case: Case) -> Outcome:
    text = case.data.decode("utf-8")
    hits = [m.start() for m in re.finditer(re.escape(case.old), text)]
    if len(hits) == 1:
        return Outcome(text.replace(case.old, case.new, 1).encode())
    lines = [text.count("\n", 0, h) + 1 for h in hits]   # the "Multiple occurrences in lines [..]" message
    return Outcome(None, case.span[0] in lines)


def load_aider(cache: Path) -> dict[str, Any]:
    """aider's editblock functions without aider: download the wheel, exec only top-level defs."""
    wheel = next(cache.glob(f"aider_chat-{AIDER_VERSION}-*.whl"), None)
    if wheel is None:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        f"aider-chat=={AIDER_VERSION}", "-d", str(cache)], check=True)
        wheel = next(cache.glob(f"aider_chat-{AIDER_VERSION}-*.whl"))
    source = zipfile.ZipFile(wheel).read("aider/coders/editblock_coder.py").decode()
    ns: dict[str, Any] = {"difflib": difflib, "math": math, "re": re, "sys": sys, "Path": Path,
                          "SequenceMatcher": difflib.SequenceMatcher, "__name__": "aider_editblock"}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.Assign):
            try:
                exec(compile(ast.Module([node], []), "editblock_coder.py", "exec"), ns)
            except NameError:
                continue  # an assignment that needs one of aider's own modules
    return ns


def aider_runner(ns: dict[str, Any]) -> Callable[[Case], Outcome]:
    replace_chunk, similar = ns["replace_most_similar_chunk"], ns["find_similar_lines"]

    def run(case: Case) -> Outcome:
        # aider reads with universal newlines and writes with the platform's (LF here).
        text = _EOL.sub("\n", case.data.decode("utf-8"))
        out = replace_chunk(text, case.old, case.new)
        if out:
            return Outcome(out.encode())
        if case.new in text:   # "The REPLACE lines are already in <file>!"
            at = text.count("\n", 0, text.index(case.new)) + 1
            return Outcome(None, case.span[0] <= at <= case.span[1])
        shown = similar(case.old, text)   # "Did you mean to match some of these actual lines"
        if not shown:
            return Outcome(None, False)
        pos = text.find(shown)
        first = text.count("\n", 0, pos) + 1
        return Outcome(None, pos != -1 and covers((first, first + shown.count("\n")), case.span))

    return run


# ---- run and report ---------------------------------------------------------------------------------

def build_cases(per_class: int, seed: int) -> dict[str, list[Case]]:
    rng = random.Random(seed)
    files = corpus(rng)
    cases: dict[str, list[Case]] = {}
    for cls in CLASSES:
        got: list[Case] = []
        tries = 0
        while len(got) < per_class and tries < per_class * 200:
            case = make_case(cls, rng, files[tries % len(files)])
            tries += 1
            if case is not None:
                got.append(case)
        cases[cls] = got
    return cases


def score(run: Callable[[Case], Outcome], cases: list[Case]) -> dict[str, float]:
    correct = wrong = refused = declined = hinted = 0
    for case in cases:
        out = run(case)
        result = case.data if out.result is None else out.result
        if out.result is None:
            declined += 1
            hinted += out.hint_ok
        if result == case.expected:
            correct += 1
        elif result == case.data:
            refused += 1
        else:
            wrong += 1
    n = len(cases) or 1
    return {"correct": 100 * correct / n, "wrong": 100 * wrong / n, "refused": 100 * refused / n,
            "declined": declined, "hinted": hinted, "hint": 100 * hinted / declined if declined else float("nan")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=150, help="cases per drift class")
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--aider-cache", type=Path, default=Path(tempfile.gettempdir()) / "keel-bench-aider")
    args = parser.parse_args()
    started = time.perf_counter()
    cases = build_cases(args.cases, args.seed)
    runners: dict[str, Callable[[Case], Outcome]] = {"keel": run_keel, "strict": run_strict}
    try:
        runners["aider"] = aider_runner(load_aider(args.aider_cache))
    except (subprocess.CalledProcessError, OSError, KeyError, StopIteration) as e:
        print(f"aider {AIDER_VERSION} unavailable ({e}); its comparisons are NOT RUN")
    table = {name: {cls: score(run, cases[cls]) for cls in CLASSES} for name, run in runners.items()}

    names = list(runners)
    head = f"{'class':<16}{'n':>5}  " + "  ".join(f"{n + ': ok/wrong/ref/hint%':<30}" for n in names)
    print(head)
    print("-" * len(head))
    for cls in CLASSES:
        cells = []
        for n in names:
            r = table[n][cls]
            cells.append(f"{r['correct']:5.1f} /{r['wrong']:5.1f} /{r['refused']:5.1f} /{r['hint']:5.1f}".ljust(30))
        print(f"{cls:<16}{len(cases[cls]):>5}  " + "  ".join(cells))
    print("(ok = expected bytes; wrong = changed but not expected; ref = unchanged when a change was due; "
          "hint% = refusals naming the intended region. aider's crlf_file 'wrong' = it rewrites CRLF as LF.)")

    keel = table["keel"]
    checks = [("keel wrong-location is 0 in every class", all(keel[c]["wrong"] == 0 for c in CLASSES))]
    if "aider" in table:
        worse = [c for c in CLASSES if c != AMBIGUOUS_CLASS and keel[c]["correct"] < table["aider"][c]["correct"]]
        checks.append((f"keel correct >= aider in every class but {AMBIGUOUS_CLASS}"
                       + (f" (below in: {', '.join(worse)})" if worse else ""), not worse))
    declined = sum(keel[c]["declined"] for c in CLASSES)
    hinted = sum(keel[c]["hinted"] for c in CLASSES)
    rate = 100 * hinted / declined if declined else 100.0
    checks.append((f">= 90% of keel refusals name the right region ({hinted}/{declined} = {rate:.1f}%)", rate >= 90))
    for label, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    print(f"{sum(len(v) for v in cases.values())} cases, {time.perf_counter() - started:.1f} s")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
