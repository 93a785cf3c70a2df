"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { escapeHtml } = require("../src/escape.js");

test("the five special characters", () => {
  assert.strictEqual(escapeHtml(`<>"'&`), "&lt;&gt;&quot;&#39;&amp;");
});

test("an ampersand is escaped once", () => {
  assert.strictEqual(escapeHtml("<b> & </b>"), "&lt;b&gt; &amp; &lt;/b&gt;");
});
