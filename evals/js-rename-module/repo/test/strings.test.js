"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { capitalize, kebabCase, padRight } = require("../lib/strings");

test("capitalize", () => assert.strictEqual(capitalize("hello world"), "Hello world"));
test("kebabCase", () => assert.strictEqual(kebabCase(" Open Issues! "), "open-issues"));
test("padRight", () => assert.strictEqual(padRight("ab", 4), "ab  "));
