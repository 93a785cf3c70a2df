"use strict";
const { capitalize, padRight } = require("./strings");

/** One line per row, names capitalized and aligned: "Open issues  3". */
function renderReport(rows) {
  const width = Math.max(0, ...rows.map((r) => r.name.length)) + 2;
  return rows.map((r) => padRight(capitalize(r.name), width) + String(r.count)).join("\n");
}

module.exports = { renderReport };
