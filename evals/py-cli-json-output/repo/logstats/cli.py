"""The logstats command line: python -m logstats ACCESS_LOG [--top N]"""

import argparse

from logstats.parse import parse_file
from logstats.report import render_text, summarize


def build_parser():
    parser = argparse.ArgumentParser(prog="logstats", description="Summarize a web server access log.")
    parser.add_argument("log", help="access log in Common Log Format")
    parser.add_argument("--top", type=int, default=5, help="how many of the busiest paths to show")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    summary = summarize(parse_file(args.log), top=args.top)
    print(render_text(summary))
    return 0
