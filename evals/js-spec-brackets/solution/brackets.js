"use strict";

const CLOSER = { "(": ")", "[": "]", "{": "}" };
const CLOSERS = new Set(Object.values(CLOSER));

function firstProblem(text) {
  const open = [];
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch in CLOSER) {
      open.push(ch);
    } else if (CLOSERS.has(ch)) {
      const top = open.pop();
      if (top === undefined) return { index: i, found: ch, expected: null };
      if (CLOSER[top] !== ch) return { index: i, found: ch, expected: CLOSER[top] };
    }
  }
  if (open.length) return { index: text.length, found: null, expected: CLOSER[open[open.length - 1]] };
  return null;
}

function isBalanced(text) {
  return firstProblem(text) === null;
}

module.exports = { isBalanced, firstProblem };
