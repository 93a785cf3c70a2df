"""The exec helper of the Landlock tier: ``python -m keel.policy.landlock_exec PLAN_JSON -- PROGRAM ARGS...``.

It applies the ruleset to its own process (and, unless the network was approved, the seccomp
filter of ``keel.policy.seccomp`` that refuses UDP, raw and netlink sockets) and then execs the program, which inherits the
confinement (so does everything it starts). A helper process rather than ``preexec_fn``:
keel is threaded, and running Python between fork and exec in a threaded process can deadlock.
keel starts it with ``python -I -S`` and only the standard library is imported here, so no
``.pth`` file, ``PYTHONPATH`` or user site from the command's environment runs before the rules.

If the rules cannot be applied the program is not run (exit 126): a command believed to be
confined never runs unconfined.
"""

from __future__ import annotations

import os
import sys

from keel.policy import seccomp
from keel.policy.landlock import LandlockError, LandlockPlan, abi_version, restrict

EXIT_CANNOT_CONFINE = 126


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print("usage: landlock_exec PLAN_JSON -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    try:
        plan = LandlockPlan.from_json(args[0])
        abi = abi_version()
        restrict(plan, abi)
        if not plan.network and seccomp.supported():
            seccomp.install(allow_tcp=abi >= 4)    # UDP, raw, netlink: what Landlock does not cover
    except (LandlockError, ValueError, KeyError, OSError) as exc:
        print(f"keel: could not apply the Landlock sandbox, command not run: {exc}", file=sys.stderr)
        return EXIT_CANNOT_CONFINE
    try:
        os.execvp(args[2], args[2:])
    except OSError as exc:
        print(f"keel: {args[2]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main())
