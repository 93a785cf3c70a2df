"use strict";

function isBalanced(text) {
  throw new Error("Remove this statement and implement this function");
}

function firstProblem(text) {
  throw new Error("Remove this statement and implement this function");
}

module.exports = { isBalanced, firstProblem };
