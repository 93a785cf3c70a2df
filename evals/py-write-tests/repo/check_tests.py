"""Do the tests catch real bugs? Runs them against broken copies of the code (mutants.json).

    python check_tests.py TEST_FILE [TEST_FILE ...]

Each mutant replaces one piece of the code with a plausible mistake, in a scratch copy of this
project. Good tests fail on every mutant; a mutant they pass on is a bug they would let through.
Exit status 0 only when the tests pass on the real code and fail on every mutant.
"""

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # a mutant of the same size written within a second must not hit a stale .pyc


def forget_modules_under(root):
    """Drop the project's modules (and the test modules) so the next run imports them afresh."""
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and Path(path).resolve().is_relative_to(root):
            del sys.modules[name]


def run_tests(root, tests):
    """pytest in this process (one interpreter start for all the mutants): (exit code, output)."""
    forget_modules_under(root)
    output = io.StringIO()
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            code = pytest.main(["-q", "-x", "-p", "no:cacheprovider", "--rootdir", str(root),
                                *[str(root / t) for t in tests]])
    finally:
        os.chdir(cwd)
        forget_modules_under(root)
    return int(code), output.getvalue()


def main(tests):
    if not tests:
        print(__doc__.strip())
        return 2
    missing = [t for t in tests if not (HERE / t).is_file()]
    if missing:
        print(f"no such test file: {', '.join(missing)}")
        return 1
    survivors = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch).resolve() / "project"
        shutil.copytree(HERE, root, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache"))
        code, output = run_tests(root, tests)
        if code != 0:
            print(f"the tests do not pass on the real code:\n{output[-3000:]}")
            return 1
        for mutant in json.loads((HERE / "mutants.json").read_text()):
            target = root / mutant["file"]
            original = (HERE / mutant["file"]).read_text()
            if original.count(mutant["old"]) != 1:
                print(f"mutant {mutant['why']!r} no longer applies to {mutant['file']}")
                return 1
            target.write_text(original.replace(mutant["old"], mutant["new"]))
            code, _ = run_tests(root, tests)
            target.write_text(original)
            print(f"{'caught' if code != 0 else 'MISSED'}: {mutant['why']}")
            if code == 0:
                survivors.append(mutant["why"])
    if survivors:
        print(f"{len(survivors)} bug(s) the tests let through: {'; '.join(survivors)}")
        return 1
    print("the tests catch every mutant")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
