"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { daysInMonth, monthGrid } = require("./calendar.js");

test("February in a leap year", () => {
  assert.strictEqual(daysInMonth(2024, 2), 29);
});

test("February in a common year", () => {
  assert.strictEqual(daysInMonth(2023, 2), 28);
});

test("thirty and thirty-one day months", () => {
  assert.strictEqual(daysInMonth(2024, 1), 31);
  assert.strictEqual(daysInMonth(2024, 4), 30);
});

test("the grid ends on the last day", () => {
  const grid = monthGrid(2024, 3);
  assert.strictEqual(grid[grid.length - 1], 31);
});
