"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { Emitter } = require("../src/emitter.js");

test("listeners run in order with the arguments", () => {
  const e = new Emitter();
  const calls = [];
  e.on("data", (a, b) => calls.push(["first", a, b])).on("data", (a) => calls.push(["second", a]));
  assert.strictEqual(e.emit("data", 1, 2), true);
  assert.deepStrictEqual(calls, [["first", 1, 2], ["second", 1]]);
});

test("off removes a listener", () => {
  const e = new Emitter();
  const f = () => assert.fail("should not run");
  e.on("x", f).off("x", f);
  assert.strictEqual(e.emit("x"), false);
});

test("a non-function listener is refused", () => {
  assert.throws(() => new Emitter().on("x", 42), TypeError);
});
