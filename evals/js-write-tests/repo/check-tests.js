"use strict";
// Do the tests catch real bugs? Runs them against broken copies of the code (mutants.json).
//
//   node check-tests.js TEST_FILE [TEST_FILE ...]
//
// Each mutant replaces one piece of the code with a plausible mistake, in a scratch copy of this
// project. Good tests fail on every mutant; a mutant they pass on is a bug they would let through.
// Exit status 0 only when the tests pass on the real code and fail on every mutant.
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { spawnSync } = require("node:child_process");

function runTests(root, tests) {
  const done = spawnSync(process.execPath, ["--test", ...tests], { cwd: root, encoding: "utf8", timeout: 120000 });
  return { code: done.status, output: (done.stdout || "") + (done.stderr || "") };
}

function main(tests) {
  if (tests.length === 0) {
    console.log("usage: node check-tests.js TEST_FILE [TEST_FILE ...]");
    return 2;
  }
  const missing = tests.filter((t) => !fs.existsSync(path.join(__dirname, t)));
  if (missing.length) {
    console.log(`no such test file: ${missing.join(", ")}`);
    return 1;
  }
  const real = runTests(__dirname, tests);
  if (real.code !== 0) {
    console.log(`the tests do not pass on the real code:\n${real.output.slice(-3000)}`);
    return 1;
  }
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "mutants-"));
  const root = path.join(scratch, "project");
  const survivors = [];
  try {
    fs.cpSync(__dirname, root, { recursive: true, filter: (src) => !src.includes(`${path.sep}.git`) });
    for (const mutant of JSON.parse(fs.readFileSync(path.join(__dirname, "mutants.json"), "utf8"))) {
      const original = fs.readFileSync(path.join(__dirname, mutant.file), "utf8");
      if (original.split(mutant.old).length !== 2) {
        console.log(`mutant "${mutant.why}" no longer applies to ${mutant.file}`);
        return 1;
      }
      fs.writeFileSync(path.join(root, mutant.file), original.replace(mutant.old, () => mutant.new));
      const { code } = runTests(root, tests);
      fs.writeFileSync(path.join(root, mutant.file), original);
      console.log(`${code !== 0 ? "caught" : "MISSED"}: ${mutant.why}`);
      if (code === 0) survivors.push(mutant.why);
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  if (survivors.length) {
    console.log(`${survivors.length} bug(s) the tests let through: ${survivors.join("; ")}`);
    return 1;
  }
  console.log("the tests catch every mutant");
  return 0;
}

process.exitCode = main(process.argv.slice(2));
