"""The shell policy: parse a command line, find every command that would run, judge each.

Modules, in the order a command passes through them (docs/policy.md follows the same order):

- ``reader`` — the line as bash reads it (continuations joined, CRs and here-doc bodies where bash
  puts them) before anything parses it;
- ``parse``, ``walk``, ``words``, ``taint`` — the tree-sitter-bash parse, flattened into the
  simple commands that would run, with their words and redirections (and variables holding
  run-time input that are evaluated as arithmetic);
- ``unwrap``   — peels wrappers (env, sudo, xargs, bash -c ...) and classifies env assignments;
- ``paths``, ``secrets`` — where a word points (workspace, outside, protected, runs-later) and
  which files look like secrets;
- ``facts`` (with ``facts.toml``) — the one table of commands and options the judges know, with
  match/not-match examples checked when it loads, and the one option parser;
- ``commands``, ``text``, ``tools``, ``builds``, ``git``, ``gitrepo``, ``system`` — findings and the
  per-command judges by family (``gitrepo``: repository config that makes git run programs);
- ``options``, ``args`` — rules every command's arguments pass (allow only on
  positive knowledge: each command's list of known-safe options, writes through options,
  paths built at run time, secrets through globs, recursive readers and git objects);
- ``line``     — rules about the whole line (exfiltration, downloads that run, detached processes);
- ``decision``, ``risk`` — the OS tier applied and the verdict:
  ``classify_command(command, workspace, confined=...) -> Verdict``.

Importing this package has no side effects; import the module you need.
"""
