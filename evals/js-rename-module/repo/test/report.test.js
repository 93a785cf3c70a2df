"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { execFileSync } = require("node:child_process");
const path = require("node:path");
const { renderReport } = require("..");

test("rows are aligned", () => {
  const text = renderReport([{ name: "bugs", count: 2 }, { name: "open issues", count: 10 }]);
  assert.strictEqual(text, "Bugs         2\nOpen issues  10");
});

test("the command line prints the report", () => {
  const out = execFileSync(process.execPath, [path.join(__dirname, "..", "lib", "cli.js"), "bugs=2"]);
  assert.strictEqual(out.toString(), "Bugs  2\n");
});
