"""Tiny inline-SVG charts for the static report: no library, no CDN, no script — opens offline.

Each function returns one ``<svg>`` element whose marks (rect, circle) carry a ``<title>`` so a
hover shows the number behind them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#d53f8c", "#718096")
OUTCOME_COLORS = {"success": "#38a169", "done_unclaimed": "#9ae6b4", "false_done": "#c53030", "failed": "#ed8936", "error": "#718096",
                  "missing": "#e2e8f0"}
FONT = 'font-family="sans-serif" font-size="11"'


def _svg(chart_id: str, width: int, height: int, body: list[str], label: str) -> str:
    return (f'<svg id="{escape(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
            + "".join(body) + "</svg>")


def _fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:g}" if float(value).is_integer() else f"{value:.2f}"


def hbar_chart(chart_id: str, series: Mapping[str, Mapping[str, float]], label: str, width: int = 560) -> str:
    """Grouped horizontal bars: category -> {series name: value}; one color per series."""
    names = sorted({name for values in series.values() for name in values})
    row_h, gap, left = 14, 8, 170
    cats = list(series)
    height = max(1, len(cats)) * (row_h * max(1, len(names)) + gap) + 24 + 16 * len(names)
    top = max([v for values in series.values() for v in values.values()] or [1]) or 1
    body: list[str] = []
    y = 8
    for cat in cats:
        body.append(f'<text x="{left - 6}" y="{y + row_h * len(names) / 2 + 4:.0f}" text-anchor="end" {FONT}>'
                    f"{escape(cat[:28])}</text>")
        for i, name in enumerate(names):
            value = float(series[cat].get(name, 0))
            w = (width - left - 50) * value / top
            color = PALETTE[i % len(PALETTE)]
            body.append(f'<rect class="mark" x="{left}" y="{y}" width="{max(w, 1):.1f}" height="{row_h - 2}" '
                        f'fill="{color}"><title>{escape(cat)} · {escape(name)}: {_fmt(value)}</title></rect>')
            body.append(f'<text x="{left + w + 4:.1f}" y="{y + row_h - 4}" {FONT}>{_fmt(value)}</text>')
            y += row_h
        y += gap
    body += _legend(names, 8, y + 8)
    return _svg(chart_id, width, height, body, label)


def _legend(names: Sequence[str], x: int, y: int) -> list[str]:
    out = []
    for i, name in enumerate(names):
        out.append(f'<rect x="{x}" y="{y + 16 * i - 9}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
                   f'<text x="{x + 14}" y="{y + 16 * i}" {FONT}>{escape(name)}</text>')
    return out


def strip_plot(chart_id: str, groups: Mapping[str, Sequence[tuple[str, float]]], label: str, unit: str = "",
               width: int = 560) -> str:
    """One row per group (agent); one dot per run at its value; a tick at the median."""
    left, row_h = 120, 36
    names = list(groups)
    height = max(1, len(names)) * row_h + 34
    values = [v for pts in groups.values() for _, v in pts]
    lo, hi = 0.0, max(values or [1.0]) or 1.0
    span = width - left - 30

    def x(v: float) -> float:
        return left + span * (v - lo) / (hi - lo)

    body = [f'<line x1="{left}" y1="{height - 24}" x2="{left + span}" y2="{height - 24}" stroke="#a0aec0"/>']
    for tick in (lo, hi / 2, hi):
        body.append(f'<text x="{x(tick):.1f}" y="{height - 8}" text-anchor="middle" {FONT}>{_fmt(tick)}{escape(unit)}</text>')
    for i, name in enumerate(names):
        y = 18 + i * row_h
        color = PALETTE[i % len(PALETTE)]
        body.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end" {FONT}>{escape(name)}</text>')
        pts = sorted(groups[name], key=lambda p: p[1])
        for case, v in pts:
            body.append(f'<circle class="mark" cx="{x(v):.1f}" cy="{y}" r="4" fill="{color}" fill-opacity="0.6">'
                        f"<title>{escape(case)}: {_fmt(v)}{escape(unit)}</title></circle>")
        if pts:
            mid = pts[len(pts) // 2][1] if len(pts) % 2 else (pts[len(pts) // 2 - 1][1] + pts[len(pts) // 2][1]) / 2
            body.append(f'<line x1="{x(mid):.1f}" y1="{y - 10}" x2="{x(mid):.1f}" y2="{y + 10}" stroke="#1a202c" '
                        f'stroke-width="2"><title>median {_fmt(mid)}{escape(unit)}</title></line>')
    return _svg(chart_id, width, height, body, label)


def outcome_grid(chart_id: str, rows: Sequence[tuple[str, Sequence[tuple[str, str, str]]]],
                 columns: Sequence[str], label: str) -> str:
    """Rows are cases; each cell (column header, outcome, tooltip) is colored by outcome."""
    left, cell = 190, 20
    top = 16 + int(5.5 * max((len(c) for c in columns), default=4))  # room for the rotated headers
    width = left + cell * max(1, len(columns)) + 10
    height = top + cell * max(1, len(rows)) + 10
    body: list[str] = []
    for j, col in enumerate(columns):
        cx = left + j * cell + cell / 2
        body.append(f'<text x="{cx:.0f}" y="{top - 6}" transform="rotate(-60 {cx:.0f} {top - 6})" {FONT}>'
                    f"{escape(col)}</text>")
    for i, (case, cells) in enumerate(rows):
        y = top + i * cell
        body.append(f'<text x="{left - 6}" y="{y + cell - 5}" text-anchor="end" {FONT}>{escape(case[:30])}</text>')
        for j, (_col, word, tip) in enumerate(cells):
            color = OUTCOME_COLORS.get(word, OUTCOME_COLORS["missing"])
            body.append(f'<rect class="mark cell {escape(word)}" x="{left + j * cell}" y="{y}" width="{cell - 2}" '
                        f'height="{cell - 2}" fill="{color}"><title>{escape(tip)}</title></rect>')
    return _svg(chart_id, width, height, body, label)
