"use strict";
const { parseDate, formatDate, addDays } = require("./dates.js");

const TERMS_DAYS = { net30: 30, net14: 14, now: 0 };

/** The day an invoice must be paid by, as "YYYY-MM-DD". */
function dueDate(invoice) {
  const days = TERMS_DAYS[invoice.terms] ?? 30;
  return formatDate(addDays(parseDate(invoice.issued), days));
}

/** Whether an unpaid invoice is past its due date on `today` ("YYYY-MM-DD"). */
function isOverdue(invoice, today) {
  return !invoice.paid && dueDate(invoice) < today;
}

module.exports = { dueDate, isOverdue };
