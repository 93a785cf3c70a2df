#!/usr/bin/env node
"use strict";
const { renderReport } = require("./report");
const { kebabCase } = require("./strings.js");

function main(argv) {
  const rows = argv.map((arg) => {
    const [name, count] = arg.split("=");
    return { name, count: Number(count) };
  });
  if (process.env.REPORT_IDS) {
    for (const row of rows) console.log(kebabCase(row.name));
    return;
  }
  console.log(renderReport(rows));
}

if (require.main === module) main(process.argv.slice(2));

module.exports = { main };
