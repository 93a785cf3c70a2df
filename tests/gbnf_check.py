"""A small GBNF recognizer for tests: does a grammar accept a whole string?

Covers the subset llama.cpp's JSON-schema converter and keel's frame produce: literals, character
classes (negation, ranges, escapes), rule references, groups, alternation and the ? * + {m,n}
repetitions. Set-of-end-positions matching: slow for big inputs, exact for test-sized ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

_ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "]": "]", "[": "[", "-": "-", "^": "^", "/": "/"}


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Cls:
    negated: bool
    ranges: tuple[tuple[str, str], ...]

    def ok(self, ch: str) -> bool:
        inside = any(lo <= ch <= hi for lo, hi in self.ranges)
        return inside != self.negated


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class Alt:
    options: tuple


@dataclass(frozen=True)
class Rep:
    node: object
    lo: int
    hi: int | None


def _escape(text: str, i: int) -> tuple[str, int]:
    ch = text[i + 1]
    if ch == "x":
        return chr(int(text[i + 2:i + 4], 16)), i + 4
    if ch == "u":
        return chr(int(text[i + 2:i + 6], 16)), i + 6
    return _ESC[ch], i + 2


class _Parser:
    def __init__(self, body: str) -> None:
        self.s, self.i = body, 0

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t\n":
            self.i += 1

    def alt(self) -> Alt:
        options = [self.seq()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            options.append(self.seq())
        return Alt(tuple(options))

    def seq(self) -> Seq:
        items = []
        while True:
            self.ws()
            if self.i >= len(self.s) or self.s[self.i] in "|)":
                return Seq(tuple(items))
            items.append(self.postfix(self.atom()))

    def atom(self) -> object:
        c = self.s[self.i]
        if c == '"':
            out, self.i = [], self.i + 1
            while self.s[self.i] != '"':
                if self.s[self.i] == "\\":
                    ch, self.i = _escape(self.s, self.i)
                    out.append(ch)
                else:
                    out.append(self.s[self.i])
                    self.i += 1
            self.i += 1
            return Lit("".join(out))
        if c == "[":
            self.i += 1
            negated = self.s[self.i] == "^"
            self.i += negated
            ranges = []
            while self.s[self.i] != "]":
                lo, self.i = _escape(self.s, self.i) if self.s[self.i] == "\\" else (self.s[self.i], self.i + 1)
                hi = lo
                if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                    self.i += 1
                    hi, self.i = _escape(self.s, self.i) if self.s[self.i] == "\\" else (self.s[self.i], self.i + 1)
                ranges.append((lo, hi))
            self.i += 1
            return Cls(negated, tuple(ranges))
        if c == "(":
            self.i += 1
            inner = self.alt()
            assert self.s[self.i] == ")", self.s[self.i:]
            self.i += 1
            return inner
        m = re.compile(r"[a-zA-Z0-9-]+").match(self.s, self.i)
        assert m, f"cannot parse at {self.s[self.i:self.i + 30]!r}"
        self.i = m.end()
        return Ref(m.group())

    def postfix(self, node: object) -> object:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in "?*+":
                self.i += 1
                node = Rep(node, 1 if c == "+" else 0, 1 if c == "?" else None)
            elif c == "{":
                end = self.s.index("}", self.i)
                inside = self.s[self.i + 1:end]
                self.i = end + 1
                if "," in inside:
                    lo, _, hi = inside.partition(",")
                    node = Rep(node, int(lo), int(hi) if hi.strip() else None)
                else:
                    node = Rep(node, int(inside), int(inside))
            else:
                return node
        return node


def parse(grammar: str) -> dict[str, Alt]:
    rules: dict[str, Alt] = {}
    for line in grammar.splitlines():
        if "::=" in line:
            name, _, body = line.partition("::=")
            rules[name.strip()] = _Parser(body.strip()).alt()
    return rules


def accepts(grammar: str, text: str, root: str = "root") -> bool:
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 50000))  # maxLength becomes nesting hundreds of groups deep
    try:
        return _accepts(grammar, text, root)
    finally:
        sys.setrecursionlimit(old)


def _accepts(grammar: str, text: str, root: str) -> bool:
    rules = parse(grammar)

    @cache
    def rule(name: str, pos: int) -> frozenset[int]:
        return frozenset(match(rules[name], pos))

    def match(node: object, pos: int) -> set[int]:
        if isinstance(node, Lit):
            return {pos + len(node.text)} if text.startswith(node.text, pos) else set()
        if isinstance(node, Cls):
            return {pos + 1} if pos < len(text) and node.ok(text[pos]) else set()
        if isinstance(node, Ref):
            return set(rule(node.name, pos))
        if isinstance(node, Seq):
            ends = {pos}
            for item in node.items:
                ends = set().union(*(match(item, p) for p in ends)) if ends else set()
            return ends
        if isinstance(node, Alt):
            return set().union(*(match(o, pos) for o in node.options))
        assert isinstance(node, Rep)
        done = {pos} if node.lo == 0 else set()
        frontier, seen, count = {pos}, {pos}, 0
        while frontier and (node.hi is None or count < node.hi):
            count += 1
            frontier = set().union(*(match(node.node, p) for p in frontier))
            if node.hi is None:
                frontier -= seen
                seen |= frontier
            if count >= node.lo:
                done |= frontier
        return done

    return len(text) in rule(root, 0)
