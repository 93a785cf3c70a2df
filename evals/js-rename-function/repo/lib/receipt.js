"use strict";
const { fmtMoney, sumCents } = require("./money.js");

function receiptLines(items) {
  const lines = items.map((item) => `${item.name} x${item.qty ?? 1}  ${fmtMoney(item.cents * (item.qty ?? 1))}`);
  lines.push(`TOTAL  ${fmtMoney(sumCents(items))}`);
  return lines;
}

module.exports = { receiptLines };
