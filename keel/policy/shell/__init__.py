"""The shell risk policy: parse a command line, find every command that would run, judge each.

Modules, in the order a command passes through them:

- ``parse``    — tree records (Word, Redirect, SimpleCommand) and the bash parser;
- ``walk``     — flattens the syntax tree into the simple commands that would run;
- ``unwrap``   — peels wrappers (env, sudo, xargs, bash -c ...) and judges env assignments;
- ``paths``    — where a word points (workspace, outside, secret, protected);
- ``commands`` — findings, option parsing, file writers and deleters, read-only utilities;
- ``text``, ``tools``, ``git``, ``system`` — per-command judges by family;
- ``risk``     — the classifier: ``classify_command(command, workspace) -> Verdict``.

Importing this package has no side effects; import the module you need.
"""
