"use strict";

/** True when lo <= value <= hi. */
function inRange(value, lo, hi) {
  return value >= lo && value <= hi;
}

/** value limited to the closed interval [lo, hi]. */
function clamp(value, lo, hi) {
  if (value < lo) return hi;
  if (value > hi) return hi;
  return value;
}

module.exports = { clamp, inRange };
