"use strict";
const { formatMoney, sumCents } = require("./money.js");

function receiptLines(items) {
  const lines = items.map((item) => `${item.name} x${item.qty ?? 1}  ${formatMoney(item.cents * (item.qty ?? 1))}`);
  lines.push(`TOTAL  ${formatMoney(sumCents(items))}`);
  return lines;
}

module.exports = { receiptLines };
