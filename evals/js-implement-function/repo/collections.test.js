"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { chunk, groupBy, unique } = require("./collections.js");

test("chunk splits into fixed-size pieces", () => {
  assert.deepStrictEqual(chunk([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
});

test("chunk of an empty array is empty", () => {
  assert.deepStrictEqual(chunk([], 3), []);
});

test("chunk rejects a size below one", () => {
  assert.throws(() => chunk([1, 2], 0), RangeError);
});

test("groupBy keeps order", () => {
  assert.deepStrictEqual(groupBy(["ab", "c", "de"], (s) => s.length), { 2: ["ab", "de"], 1: ["c"] });
});

test("unique keeps the first occurrence", () => {
  assert.deepStrictEqual(unique([3, 1, 3, 2, 1]), [3, 1, 2]);
});
