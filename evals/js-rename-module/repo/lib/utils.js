"use strict";

/** "hello world" -> "Hello world" */
function capitalize(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** "Open Issues" -> "open-issues" */
function kebabCase(text) {
  return text.trim().toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
}

/** text padded with spaces on the right to `width` characters (never cut). */
function padRight(text, width) {
  return text.length >= width ? text : text + " ".repeat(width - text.length);
}

module.exports = { capitalize, kebabCase, padRight };
