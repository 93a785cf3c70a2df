"use strict";

/**
 * Split `items` into arrays of `size` elements; the last one may be shorter.
 * chunk([1, 2, 3], 2) -> [[1, 2], [3]]. `size` must be a positive integer (RangeError otherwise).
 * The input array is not modified.
 */
function chunk(items, size) {
  if (!Number.isInteger(size) || size < 1) {
    throw new RangeError(`chunk size must be a positive integer, got ${size}`);
  }
  const pieces = [];
  for (let start = 0; start < items.length; start += size) {
    pieces.push(items.slice(start, start + size));
  }
  return pieces;
}

/**
 * Group `items` into an object keyed by `keyOf(item)`, keeping the items' order inside each group
 * and the groups in the order their first item appears.
 * groupBy(["ab", "c", "de"], (s) => s.length) -> { 2: ["ab", "de"], 1: ["c"] }
 */
function groupBy(items, keyOf) {
  const groups = {};
  for (const item of items) {
    const key = keyOf(item);
    (groups[key] ??= []).push(item);
  }
  return groups;
}

/** The items without duplicates, first occurrence kept. */
function unique(items) {
  return [...new Set(items)];
}

module.exports = { chunk, groupBy, unique };
