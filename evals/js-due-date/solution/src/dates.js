"use strict";

/** "2024-03-05" -> a Date at local midnight of that day. */
function parseDate(text) {
  const [year, month, day] = text.split("-").map(Number);
  return new Date(year, month - 1, day);   // Date counts months from 0
}

/** A Date -> "2024-03-05". */
function formatDate(date) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

/** A new Date `days` days after `date`. */
function addDays(date, days) {
  const next = new Date(date.getTime());
  next.setDate(next.getDate() + days);
  return next;
}

module.exports = { parseDate, formatDate, addDays };
