"""`keel undo`: put back the files a session changed, byte for byte (keel.trace.undo)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_USAGE = 2


def undo_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="keel undo",
                                description="Restore the files the latest session in this workspace changed.",
                                epilog="exit codes: 0 everything asked for was restored, 1 some file could not "
                                       "be (changed since, or changed by a command keel had no copy for), 2 usage")
    p.add_argument("--cwd", default=".", help="the workspace (default: current directory)")
    p.add_argument("--session", help="a session id or log path instead of the latest one here")
    p.add_argument("--to", type=int, default=0, metavar="STEP",
                   help="keep what steps 1..STEP did, undo the rest (default 0: undo the whole session)")
    p.add_argument("--dry-run", action="store_true", help="say what would be restored, change nothing")
    p.add_argument("--force", action="store_true", help="also overwrite files changed since the session")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    args = p.parse_args(argv)
    if args.to < 0:
        print("keel: --to needs a step number of 0 or more", file=sys.stderr)
        return EXIT_USAGE
    from keel.trace.undo import undo

    workspace = Path(args.cwd).resolve()
    try:
        report = undo(workspace, session=args.session, to_step=args.to, force=args.force, dry_run=args.dry_run)
    except ValueError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps({**report.to_json(), "dry_run": args.dry_run}))
    else:
        what = "would undo" if args.dry_run else "undo"
        scope = "the whole session" if args.to == 0 else f"steps after {args.to}"
        where = "" if Path(report.workspace).resolve() == workspace else f" in {report.workspace}"  # --session
        print(f"keel {what}: session {report.session_id}{where}, {scope}")
        for line in report.lines() or ["nothing to undo"]:
            print(f"  {line}")
    return 0 if report.ok else 1
