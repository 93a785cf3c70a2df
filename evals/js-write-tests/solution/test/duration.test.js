"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { humanDuration } = require("../duration.js");

test("zero is 0s", () => assert.strictEqual(humanDuration(0), "0s"));

test("seconds, minutes, hours and days", () => {
  assert.strictEqual(humanDuration(59), "59s");
  assert.strictEqual(humanDuration(61), "1m 1s");
  assert.strictEqual(humanDuration(3600), "1h");
  assert.strictEqual(humanDuration(90061), "1d 1h 1m 1s");
});

test("zero parts are left out", () => {
  assert.strictEqual(humanDuration(86400 + 5), "1d 5s");
});

test("maxParts keeps the largest parts and truncates", () => {
  assert.strictEqual(humanDuration(90061, 2), "1d 1h");
  assert.strictEqual(humanDuration(3599, 1), "59m");
  assert.strictEqual(humanDuration(5399, 1), "1h");
});

test("invalid input throws RangeError", () => {
  for (const bad of [-1, -5, 1.5, NaN]) assert.throws(() => humanDuration(bad), RangeError);
});
