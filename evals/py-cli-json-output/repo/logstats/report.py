"""Aggregates over parsed log entries, and their text rendering."""

from collections import Counter


def summarize(entries, top=5):
    paths = Counter(e["path"] for e in entries)
    return {
        "total": len(entries),
        "bytes": sum(e["bytes"] for e in entries),
        "by_status": dict(sorted(Counter(e["status"] for e in entries).items())),
        "top_paths": paths.most_common(top),
    }


def render_text(summary):
    lines = [f"{summary['total']} requests, {summary['bytes']} bytes"]
    lines += [f"  {status}: {count}" for status, count in summary["by_status"].items()]
    lines.append("top paths:")
    lines += [f"  {count:>5}  {path}" for path, count in summary["top_paths"]]
    return "\n".join(lines)
