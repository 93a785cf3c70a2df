"use strict";
const { renderInline } = require("./inline");

/** Markdown (headings "#".."######" and paragraphs separated by blank lines) to HTML. */
function render(markdown) {
  const blocks = markdown.split(/\n\s*\n/).map((b) => b.trim()).filter(Boolean);
  return blocks
    .map((block) => {
      const heading = /^(#{1,6})\s+(.*)$/.exec(block);
      if (heading) {
        const level = heading[1].length;
        return `<h${level}>${renderInline(heading[2])}</h${level}>`;
      }
      return `<p>${renderInline(block.replace(/\n/g, " "))}</p>`;
    })
    .join("\n");
}

module.exports = { render };
