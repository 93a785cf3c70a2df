"use strict";
const { escapeHtml } = require("./escape");

// `code`, **bold**, [text](url) — code spans first so their content is never formatted.
const TOKEN = /`([^`]+)`|\*\*(.+?)\*\*|\[([^\]]+)\]\(([^)\s]+)\)/g;

/** One line of inline markdown to HTML. */
function renderInline(text) {
  let html = "";
  let last = 0;
  for (const match of text.matchAll(TOKEN)) {
    html += escapeHtml(text.slice(last, match.index));
    const [, code, bold, label, url] = match;
    if (code !== undefined) html += `<code>${escapeHtml(code)}</code>`;
    else if (bold !== undefined) html += `<strong>${renderInline(bold)}</strong>`;
    else html += `<a href="${escapeHtml(url)}">${renderInline(label)}</a>`;
    last = match.index + match[0].length;
  }
  return html + escapeHtml(text.slice(last));
}

module.exports = { renderInline };
