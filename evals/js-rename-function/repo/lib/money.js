"use strict";

/** 1234 cents -> "$12.34"; negative amounts get a leading minus: "-$0.50". */
function fmtMoney(cents) {
  const sign = cents < 0 ? "-" : "";
  const abs = Math.abs(cents);
  return `${sign}$${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, "0")}`;
}

function sumCents(items) {
  return items.reduce((total, item) => total + item.cents * (item.qty ?? 1), 0);
}

module.exports = { fmtMoney, sumCents };
