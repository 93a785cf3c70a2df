"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { render } = require("../src/render.js");

test("headings and paragraphs", () => {
  assert.strictEqual(render("# Title\n\nSome text\nmore"), "<h1>Title</h1>\n<p>Some text more</p>");
});

test("bold, code and links", () => {
  assert.strictEqual(render("**hi** `x` [docs](http://d.test)"),
    '<p><strong>hi</strong> <code>x</code> <a href="http://d.test">docs</a></p>');
});

test("raw HTML in text is escaped", () => {
  assert.strictEqual(render("<script>alert(1)</script>"), "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>");
});

test("code spans are escaped", () => {
  assert.strictEqual(render("`<div>`"), "<p><code>&lt;div&gt;</code></p>");
});

test("link text is escaped, the URL once", () => {
  assert.strictEqual(render("[<b>](http://x.test/?a=1&b=2)"),
    '<p><a href="http://x.test/?a=1&amp;b=2">&lt;b&gt;</a></p>');
});
