"use strict";
const money = require("./money.js");

/** The line a refund prints: the amount given back, as a negative sum. */
function refundLine(item) {
  return `REFUND ${item.name}  ${money.fmtMoney(-item.cents)}`;
}

module.exports = { refundLine };
