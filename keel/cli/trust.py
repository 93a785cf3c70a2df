"""`keel trust`: let a project's own hooks and MCP servers run (or stop them, or list trusted projects)."""

from __future__ import annotations

import sys
from pathlib import Path

from keel.cli.usage import RaisingParser, UsageError


def trust_main(argv: list[str]) -> int:
    parser = RaisingParser(prog="keel trust", description=(
        "Trust a project: its .keel/config.toml hooks and .mcp.json servers may run on this machine. "
        "Trust covers those files as they are now; when they change, keel asks again."),
        epilog="exit codes: 0 done, 1 --revoke found nothing to revoke, 2 usage error")
    parser.add_argument("--cwd", default=".", help="the project (default: current directory)")
    parser.add_argument("--revoke", action="store_true", help="stop trusting the project")
    parser.add_argument("--list", action="store_true", help="list trusted projects")
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        print(f"keel trust: {e}", file=sys.stderr)
        return 2
    from keel.ext.trust import project_extensions, revoke, trust, trust_state, trusted_projects

    if args.list:
        projects = sorted(trusted_projects().items())
        for path, entry in projects:
            print(f"{path}  (since {entry.get('trusted_at', '?')})")
        if not projects:   # said, not left blank: an empty list reads as the command doing nothing
            print("no project is trusted: their hooks and .mcp.json servers do not run "
                  "(`keel trust` in a project trusts it)")
        return 0
    workspace = Path(args.cwd).resolve()
    if not workspace.is_dir():
        print(f"keel trust: {workspace} is not a directory", file=sys.stderr)
        return 2
    if args.revoke:
        if revoke(workspace):
            print(f"no longer trusted: {workspace}")
            return 0
        print(f"{workspace} was not trusted", file=sys.stderr)
        return 1
    before = trust_state(workspace)
    trust(workspace)
    print(f"trusted: {workspace}" + (" (again, after its hooks or servers changed)" if before == "changed" else ""))
    print("It may run:\n" + project_extensions(workspace).describe())
    return 0
