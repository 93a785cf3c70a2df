"""The logstats command line: python -m logstats ACCESS_LOG [--top N] [--format text|json]"""

import argparse
import json

from logstats.parse import parse_file
from logstats.report import render_text, summarize


def build_parser():
    parser = argparse.ArgumentParser(prog="logstats", description="Summarize a web server access log.")
    parser.add_argument("log", help="access log in Common Log Format")
    parser.add_argument("--top", type=int, default=5, help="how many of the busiest paths to show")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text for people (default) or one JSON object for scripts")
    return parser


def to_json(summary):
    """JSON keys are strings, so status codes become "200"; paths become objects."""
    return json.dumps({
        "total": summary["total"],
        "bytes": summary["bytes"],
        "by_status": {str(status): count for status, count in summary["by_status"].items()},
        "top_paths": [{"path": path, "count": count} for path, count in summary["top_paths"]],
    })


def main(argv=None):
    args = build_parser().parse_args(argv)
    summary = summarize(parse_file(args.log), top=args.top)
    print(to_json(summary) if args.format == "json" else render_text(summary))
    return 0
