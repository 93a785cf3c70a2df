"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { formatMoney } = require("../lib/money.js");
const { receiptLines } = require("../lib/receipt.js");
const { refundLine } = require("../lib/refund.js");

test("formatMoney", () => {
  assert.strictEqual(formatMoney(1234), "$12.34");
  assert.strictEqual(formatMoney(-50), "-$0.50");
});

test("receipt and refund still print money", () => {
  assert.deepStrictEqual(receiptLines([{ name: "tea", cents: 350, qty: 2 }]), ["tea x2  $7.00", "TOTAL  $7.00"]);
  assert.strictEqual(refundLine({ name: "tea", cents: 350 }), "REFUND tea  -$3.50");
});
