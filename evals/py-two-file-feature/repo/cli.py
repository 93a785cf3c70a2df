"""wordtop: the most common words of a text file.

    python cli.py FILE [-n N]
"""

import argparse
import sys

from service import top_words


def main(argv=None, out=None):
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog="wordtop")
    parser.add_argument("file")
    parser.add_argument("-n", type=int, default=3, help="how many words to show (default 3)")
    args = parser.parse_args(argv)
    with open(args.file, encoding="utf-8") as f:
        text = f.read()
    for word, count in top_words(text, args.n):
        print(f"{count:>4} {word}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
