"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { dueDate, isOverdue } = require("../src/invoice.js");

test("net30 invoice issued on 5 March is due on 4 April", () => {
  assert.strictEqual(dueDate({ issued: "2024-03-05", terms: "net30" }), "2024-04-04");
});

test("an invoice due now is due the day it is issued", () => {
  assert.strictEqual(dueDate({ issued: "2024-01-31", terms: "now" }), "2024-01-31");
});

test("overdue once the due date has passed", () => {
  const inv = { issued: "2024-02-01", terms: "net14", paid: false };
  assert.strictEqual(isOverdue(inv, "2024-02-15"), false);
  assert.strictEqual(isOverdue(inv, "2024-02-16"), true);
});
