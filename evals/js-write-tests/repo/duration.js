"use strict";

const UNITS = [
  ["d", 86400],
  ["h", 3600],
  ["m", 60],
  ["s", 1],
];

/**
 * Seconds as a short human duration: 0 -> "0s", 59 -> "59s", 61 -> "1m 1s", 3600 -> "1h",
 * 90061 -> "1d 1h 1m 1s". Zero parts are left out; at most `maxParts` parts, largest first
 * (the rest is dropped, not rounded). Negative or non-integer input throws a RangeError.
 */
function humanDuration(seconds, maxParts = 4) {
  if (!Number.isInteger(seconds) || seconds < 0) {
    throw new RangeError(`seconds must be a whole number >= 0, got ${seconds}`);
  }
  if (seconds === 0) return "0s";
  const parts = [];
  let rest = seconds;
  for (const [unit, size] of UNITS) {
    const count = Math.floor(rest / size);
    rest -= count * size;
    if (count > 0) parts.push(`${count}${unit}`);
  }
  return parts.slice(0, maxParts).join(" ");
}

module.exports = { humanDuration };
