"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { Emitter } = require("../src/emitter.js");

test("a once listener runs a single time", () => {
  const e = new Emitter();
  const seen = [];
  e.once("tick", (n) => seen.push(n));
  e.emit("tick", 1);
  e.emit("tick", 2);
  assert.deepStrictEqual(seen, [1]);
  assert.strictEqual(e.listenerCount("tick"), 0);
});

test("once keeps its place among the other listeners", () => {
  const e = new Emitter();
  const seen = [];
  e.on("x", () => seen.push("on1")).once("x", () => seen.push("once")).on("x", () => seen.push("on2"));
  e.emit("x");
  e.emit("x");
  assert.deepStrictEqual(seen, ["on1", "once", "on2", "on1", "on2"]);
});

test("off removes a once listener before it fires", () => {
  const e = new Emitter();
  const f = () => assert.fail("should not run");
  e.once("x", f);
  e.off("x", f);
  assert.strictEqual(e.emit("x"), false);
});

test("once passes the arguments and this", () => {
  const e = new Emitter();
  let got;
  e.once("x", function (a, b) { got = [this, a, b]; });
  e.emit("x", "a", "b");
  assert.deepStrictEqual(got, [e, "a", "b"]);
});
