"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { clamp, inRange } = require("./range.js");

test("a value inside the range is kept", () => {
  assert.strictEqual(clamp(5, 0, 10), 5);
});

test("a value above the range becomes the upper bound", () => {
  assert.strictEqual(clamp(11, 0, 10), 10);
});

test("a value below the range becomes the lower bound", () => {
  assert.strictEqual(clamp(-3, 0, 10), 0);
});

test("inRange includes both ends", () => {
  assert.ok(inRange(0, 0, 10) && inRange(10, 0, 10));
});
