"use strict";

/** Number of days in `month` (1 = January … 12 = December) of `year`. */
function daysInMonth(year, month) {
  // Day 0 of a month is the last day of the month before it.
  return new Date(year, month - 1, 0).getDate();
}

/** The dates of a month as [1, 2, …, last]. */
function monthGrid(year, month) {
  return Array.from({ length: daysInMonth(year, month) }, (_, i) => i + 1);
}

module.exports = { daysInMonth, monthGrid };
