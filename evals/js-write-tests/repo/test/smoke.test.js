"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { humanDuration } = require("../duration.js");

test("loads", () => assert.strictEqual(typeof humanDuration, "function"));
