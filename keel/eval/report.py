"""The eval report: a markdown summary and a static HTML page, both from the records alone.

False done comes first everywhere: a run that claimed ``complete`` while its acceptance fails is
the failure this product exists to remove, so it is never folded into a plain "failed".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from keel.eval import svg
from keel.eval.metrics import aggregate, by_agent, case_table

REPORT_HTML = "report.html"
SUMMARY_MD = "summary.md"
MARKS = {"success": "✓", "done_unclaimed": "✓?", "false_done": "✗!", "failed": "✗", "error": "E"}
OUTCOME_WORDS = ("success", "done_unclaimed", "false_done", "failed", "error")


def outcome_label(word: str) -> str:
    return "done but not claimed" if word == "done_unclaimed" else word.replace("_", " ")


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():   # grouped as whole numbers are: 12,992.5
        return f"{value:,.{digits}f}"
    return f"{int(value):,}" if isinstance(value, int | float) else str(value)


def _median(agg: Mapping[str, Any], key: str) -> Any:
    dist = agg["distributions"].get(key)
    return dist["median"] if dist else None


def agent_rows(records: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(agent, aggregate(rows)) for agent, rows in by_agent(records).items()]


HEADLINE = ("agent", "runs", "success", "done but not claimed", "false done", "failed", "errors", "median steps", "idle turns",
            "median prompt tok", "median completion tok", "cached share", "median wall s", "cost $")


def headline_cells(agent: str, agg: Mapping[str, Any]) -> list[str]:
    rate = agg["success_rate"]
    idle = agg["distributions"].get("idle_turns")
    return [agent, str(agg["runs"]), f"{agg['success']} ({rate:.0%})" if rate is not None else "0",
            str(agg.get("done_unclaimed", 0)), str(agg["false_done"]), str(agg["failed"]), str(agg["errors"]), _num(_median(agg, "steps")),
            _num(idle["sum"] if idle else None), _num(_median(agg, "prompt_tokens")),
            _num(_median(agg, "completion_tokens")),
            f"{agg['cached_share']:.0%}" if agg["cached_share"] is not None else "–",
            _num(_median(agg, "wall_s")), _num(agg["cost_usd"], 4)]


def false_done_runs(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted((r for r in records if r.get("outcome") == "false_done"),
                  key=lambda r: (str(r.get("agent")), str(r["case"]["id"]), int(r.get("repeat") or 0)))


def _first_failure(record: Mapping[str, Any]) -> str:
    for check in (record.get("grade") or {}).get("checks") or []:
        if not check.get("passed"):
            lines = [line.strip() for line in (check.get("detail") or "failed").splitlines() if line.strip()]
            detail = lines[0] + (f" · {lines[-1][:160]}" if len(lines) > 1 else "")  # "exit 1 · AssertionError"
            return f"{check.get('kind')} `{check.get('target')}`: {detail}"
    return record.get("error") or ""


def summary_markdown(records: Sequence[Mapping[str, Any]], title: str = "keel eval") -> str:
    lines = [f"# {title}", ""]
    if not records:
        return "\n".join(lines + ["No results yet."]) + "\n"
    rows = agent_rows(records)
    lines += ["| " + " | ".join(HEADLINE) + " |", "|" + "---|" * len(HEADLINE)]
    lines += ["| " + " | ".join(headline_cells(agent, agg)) + " |" for agent, agg in rows]
    false = false_done_runs(records)
    lines += ["", f"## False done: {len(false)}", ""]
    lines += [f"- **{r['case']['id']}** ({r.get('agent')}, repeat {r.get('repeat')}): "
              f"{_first_failure(r)}" for r in false] or ["None: no run claimed completion with failing acceptance."]
    lines += ["", "## Per case", ""]
    agents = [a for a, _ in rows]
    lines += ["| case | category | size | " + " | ".join(agents) + " |", "|---|---|---|" + "---|" * len(agents)]
    for cid, per_agent in case_table(records).items():
        any_row = next(iter(per_agent.values()))[0]
        case = any_row["case"]
        cells = []
        for agent in agents:
            runs = per_agent.get(agent, [])
            marks = " ".join(MARKS.get(str(r.get("outcome")), "?") for r in runs) or "–"
            steps = [int((r.get("metrics") or {}).get("steps") or 0) for r in runs]
            cells.append(f"{marks} ({'/'.join(map(str, steps))} steps)" if runs else "–")
        lines.append(f"| {cid} | {case.get('category', '')} | {case.get('size', '')} | " + " | ".join(cells) + " |")
    for agent, agg in rows:
        stops = ", ".join(f"{k} {v}" for k, v in agg["stop_reasons"].items())
        pushes = ", ".join(f"{k} {v}" for k, v in agg["pushbacks"].items()) or "none"
        lines += ["", f"**{agent}** stop reasons: {stops}. Pushbacks: {pushes}."]
    lines += ["", "Legend: ✓ success · ✓? done but not claimed (acceptance passes, the run did not end complete) · "
              "✗! false done (claimed complete, acceptance fails) · ✗ failed · E harness/agent error. "
              "One mark per repeat."]
    return "\n".join(lines) + "\n"


# ---- HTML ----------------------------------------------------------------------------------------

CSS = """body{font-family:sans-serif;margin:24px;color:#1a202c;max-width:1100px}
table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #cbd5e0;padding:4px 8px;font-size:13px;text-align:right}
th{background:#edf2f7}td:first-child,th:first-child{text-align:left}
.false-done{font-size:20px;padding:10px 14px;border-radius:6px;display:inline-block;margin:8px 0}
.false-done.bad{background:#fed7d7;color:#742a2a}.false-done.good{background:#c6f6d5;color:#22543d}
section{margin-bottom:28px}.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}"""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], table_id: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _grid(records: Sequence[Mapping[str, Any]], agents: Sequence[str]) -> str:
    table = case_table(records)
    repeats = max((int(r.get("repeat") or 1) for r in records), default=1)
    columns = [f"{a} r{k}" if repeats > 1 else a for a in agents for k in range(1, repeats + 1)]
    rows = []
    for cid, per_agent in table.items():
        cells = []
        for agent in agents:
            by_repeat = {int(r.get("repeat") or 1): r for r in per_agent.get(agent, [])}
            for k in range(1, repeats + 1):
                r = by_repeat.get(k)
                word = str(r.get("outcome")) if r else "missing"
                tip = f"{cid} · {agent} r{k}: {word}"
                if r:
                    m = r.get("metrics") or {}
                    tip += f" · {r.get('stop_reason')} · {m.get('steps')} steps · {m.get('wall_s')} s"
                cells.append((f"{agent} r{k}", word, tip))
        rows.append((cid, cells))
    return svg.outcome_grid("success-grid", rows, columns, "per-case outcome for each agent and repeat")


def _dist_points(records: Sequence[Mapping[str, Any]], key: str) -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = {}
    for agent, rows in by_agent(records).items():
        out[agent] = [(f"{r['case']['id']} r{r.get('repeat')}", float((r.get("metrics") or {}).get(key) or 0))
                      for r in rows if r.get("outcome") != "error"]
    return out


def report_html(records: Sequence[Mapping[str, Any]], title: str = "keel eval") -> str:
    rows = agent_rows(records)
    agents = [a for a, _ in rows]
    false = false_done_runs(records)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
             f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>"]
    verdict = "bad" if false else "good"
    parts.append(f'<section><div id="false-done" class="false-done {verdict}" data-count="{len(false)}">'
                 f"False done: <b>{len(false)}</b> run(s) claimed complete while the acceptance fails</div>")
    if false:
        parts.append("<ul>" + "".join(f"<li><b>{escape(r['case']['id'])}</b> ({escape(str(r.get('agent')))}, "
                                      f"repeat {r.get('repeat')}): {escape(_first_failure(r))}</li>"
                                      for r in false) + "</ul>")
    parts.append("</section><section><h2>Agents</h2>")
    parts.append(_table(HEADLINE, [headline_cells(a, agg) for a, agg in rows], "agents"))
    parts.append("</section><section><h2>Per-case outcome</h2>")
    parts.append('<div class="legend">' + "".join(
        f'<span style="background:{svg.OUTCOME_COLORS[w]}"></span>{escape(outcome_label(w))}'
        for w in OUTCOME_WORDS) + "</div>")
    parts.append(_grid(records, agents))
    if len(agents) > 1:
        series: dict[str, dict[str, float]] = {}
        for cid, per_agent in case_table(records).items():
            series[cid] = {a: 100.0 * sum(r.get("outcome") == "success" for r in per_agent.get(a, []))
                           / max(1, len(per_agent.get(a, []))) for a in agents}
        parts.append("</section><section><h2>" + escape(" vs ".join(agents)) + ": success % per case</h2>")
        parts.append(svg.hbar_chart("chart-peer", series, "success rate per case for each agent"))
    parts.append("</section><section><h2>Tokens per run (prompt)</h2>")
    parts.append(svg.strip_plot("chart-tokens", _dist_points(records, "prompt_tokens"), "prompt tokens per run"))
    parts.append("<h2>Wall time per run</h2>")
    parts.append(svg.strip_plot("chart-time", _dist_points(records, "wall_s"), "wall seconds per run", unit=" s"))
    parts.append("<h2>Steps per run</h2>")
    parts.append(svg.strip_plot("chart-steps", _dist_points(records, "steps"), "model calls per run"))
    stops: dict[str, dict[str, float]] = {}
    for agent, agg in rows:
        for reason, count in agg["stop_reasons"].items():
            stops.setdefault(reason, {})[agent] = float(count)
    parts.append("</section><section><h2>Stop reasons</h2>")
    parts.append(svg.hbar_chart("chart-stops", stops, "runs per stop reason"))
    pushes: dict[str, dict[str, float]] = {}
    for agent, agg in rows:
        for kind, count in agg["pushbacks"].items():
            pushes.setdefault(kind, {})[agent] = float(count)
    if pushes:
        parts.append("<h2>Pushbacks by kind</h2>")
        parts.append(svg.hbar_chart("chart-pushbacks", pushes, "pushbacks by kind"))
    parts.append("</section><section><h2>Runs</h2>")
    run_rows = [[str(r["case"]["id"]), str(r.get("agent")), str(r.get("repeat")), outcome_label(str(r.get("outcome"))),
                 str(r.get("stop_reason") or ("error" if r.get("outcome") == "error" else "none")), _num((r.get("metrics") or {}).get("steps")),
                 _num((r.get("metrics") or {}).get("idle_turns")),
                 _num((r.get("metrics") or {}).get("prompt_tokens")),
                 _num((r.get("metrics") or {}).get("wall_s"))]
                for r in sorted(records, key=lambda r: (str(r["case"]["id"]), str(r.get("agent")), r.get("repeat") or 0))]
    parts.append(_table(["case", "agent", "repeat", "outcome", "stop reason", "steps", "idle", "prompt tok", "wall s"],
                        run_rows, "runs"))
    parts.append("</section></body></html>")
    return "\n".join(parts)


def write_report(out: Path, records: Sequence[Mapping[str, Any]]) -> tuple[Path, Path]:
    title = f"keel eval · {out.name}"
    md, html = out / SUMMARY_MD, out / REPORT_HTML
    md.write_text(summary_markdown(records, title), encoding="utf-8")
    html.write_text(report_html(records, title), encoding="utf-8")
    return md, html
