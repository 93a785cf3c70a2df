"use strict";

// "&" first: escaping it after the others would turn "&lt;" into "&amp;lt;".
const ENTITIES = [
  ["&", "&amp;"],
  ["<", "&lt;"],
  [">", "&gt;"],
  ['"', "&quot;"],
  ["'", "&#39;"],
];

/** `text` safe to put between HTML tags or inside a double-quoted attribute. */
function escapeHtml(text) {
  let out = String(text);
  for (const [raw, entity] of ENTITIES) out = out.split(raw).join(entity);
  return out;
}

module.exports = { escapeHtml };
