"""How many bytes of command output the model sees, before and after keel.context.output.

Runs real failing pytest, ruff, mypy (and a long passing pytest) in a temp project through run_shell
twice: as the verification gate calls it (the capped output, which is what the model got before) and
as the model's tool does (reduced, the full output saved). Prints bytes for each and the ratio, and
checks that what matters (failing test ids, a finding per rule, the summary line) is still shown.

    python bench/command_output.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # run from a checkout without installing

from keel.policy.approval import Approver
from keel.policy.rules import RuleSet
from keel.policy.sandbox import SandboxPolicy
from keel.tools.base import ToolContext
from keel.tools.shell import RUN_SHELL, RunShellArgs, run_shell

PY = sys.executable
PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest -p no:cacheprovider"


def project(root: Path) -> None:
    tests = [f"def test_ok_{i}():\n    assert {i} * 2 == {2 * i}\n" for i in range(250)]
    tests += [f"def test_bad_{i}():\n    got = {{'id': {i}, 'tags': ['a', 'b']}}\n"
              f"    assert got == {{'id': {i}, 'tags': ['a', 'c']}}, 'tags of item {i}'\n" for i in range(8)]
    (root / "test_app.py").write_text("\n\n".join(tests))
    (root / "test_pass.py").write_text("\n\n".join(f"def test_p{i}():\n    assert True\n" for i in range(400)))
    lib = ["import os", "import sys", ""]
    lib += [f"def handler_{i}(request, retries=3):\n    value = request.get('k{i}')\n"
            f"    return value + missing_{i} + retries\n" for i in range(150)]
    (root / "lib.py").write_text("\n".join(lib))


CASES = [
    ("pytest -v, 8 of 258 fail", f"{PYTEST} -v test_app.py", ["test_bad_0", "test_bad_7", "8 failed, 250 passed"]),
    ("pytest (default), 8 fail", f"{PYTEST} test_app.py", ["test_bad_0", "tags of item 0", "8 failed"]),
    ("pytest -v, 400 pass", f"{PYTEST} -v test_pass.py", ["400 passed"]),
    ("ruff, 450 findings", f"{PY} -m ruff check --no-cache --isolated --select F,E,ANN,ARG lib.py",
     ["F821", "ANN001", "Found"]),
    ("mypy --strict, 300 errors", f"{PY} -m mypy --strict --no-incremental --cache-dir=/dev/null lib.py",
     ["no-untyped-def", "name-defined", "Found"]),
]


def main() -> int:
    total_before = total_after = 0
    with tempfile.TemporaryDirectory() as tmp:
        ws, session = Path(tmp) / "ws", Path(tmp) / "session"
        ws.mkdir()
        project(ws)
        approval = Approver("unattended", rules=RuleSet.from_config(allow=["shell(*)"]), workspace=ws)
        ctx = ToolContext(workspace=ws, session_dir=session, approval=approval, sandbox=SandboxPolicy(enabled=False))
        print(f"{'case':28} {'written':>9} {'before':>8} {'after':>7} {'ratio':>6}  kept")
        for name, command, must in CASES:
            before = run_shell(RunShellArgs(command=command, timeout=300), ctx)
            after = RUN_SHELL.execute(RunShellArgs(command=command, timeout=300), ctx)
            b, a = len(before.output.encode()), len(after.output.encode())
            total_before, total_after = total_before + b, total_after + a
            kept = all(m in after.output for m in must)
            print(f"{name:28} {after.meta['total_bytes']:>9,} {b:>8,} {a:>7,} {b / a:>5.1f}x  {'yes' if kept else 'NO'}")
    print(f"{'all':28} {'':>9} {total_before:>8,} {total_after:>7,} {total_before / total_after:>5.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
