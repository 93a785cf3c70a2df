"""Do the tests catch real bugs? Runs them against broken copies of the code (mutants.json).

    python check_tests.py TEST_FILE [TEST_FILE ...]

Each mutant replaces one piece of the code with a plausible mistake, in a scratch copy of this
project. Good tests fail on every mutant; a mutant they pass on is a bug they would let through.
Exit status 0 only when the tests pass on the real code and fail on every mutant.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_tests(root, tests):
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                          cwd=root, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def main(tests):
    if not tests:
        print(__doc__.strip())
        return 2
    missing = [t for t in tests if not (HERE / t).is_file()]
    if missing:
        print(f"no such test file: {', '.join(missing)}")
        return 1
    code, output = run_tests(HERE, tests)
    if code != 0:
        print(f"the tests do not pass on the real code:\n{output[-2000:]}")
        return 1
    survivors = []
    for mutant in json.loads((HERE / "mutants.json").read_text()):
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch) / "project"
            shutil.copytree(HERE, root, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache"))
            target = root / mutant["file"]
            source = target.read_text()
            assert source.count(mutant["old"]) == 1, f"mutant {mutant['why']!r} no longer applies"
            target.write_text(source.replace(mutant["old"], mutant["new"]))
            code, _ = run_tests(root, tests)
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
