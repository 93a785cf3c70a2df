"""Command line tool: print the most common words of a text file."""

import argparse
import collections
import re

WORD = re.compile(r"[a-z']+")


def top_words(text, n):
    counts = collections.Counter(WORD.findall(text.lower()))
    return counts.most_common(n)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    with open(args.path, encoding="utf-8") as fh:
        for word, count in top_words(fh.read(), args.top):
            print(f"{count:6d} {word}")


if __name__ == "__main__":
    main()
