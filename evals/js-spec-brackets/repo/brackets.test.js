"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { isBalanced, firstProblem } = require("./brackets.js");

test("balanced", () => {
  assert.strictEqual(isBalanced("{[()]}"), true);
  assert.strictEqual(isBalanced("x = f(a[1], {b: 2})"), true);
  assert.strictEqual(isBalanced(""), true);
});

test("not balanced", () => {
  assert.strictEqual(isBalanced("{[}]"), false);
  assert.strictEqual(isBalanced("(("), false);
  assert.strictEqual(isBalanced(")("), false);
});

test("first problem", () => {
  assert.strictEqual(firstProblem("(a)[b]"), null);
  assert.deepStrictEqual(firstProblem("(]"), { index: 1, found: "]", expected: ")" });
  assert.deepStrictEqual(firstProblem("a)"), { index: 1, found: ")", expected: null });
  assert.deepStrictEqual(firstProblem("{[("), { index: 3, found: null, expected: ")" });
});
