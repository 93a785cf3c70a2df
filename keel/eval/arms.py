"""The eval suite with the assists switched: as configured, all off, or one family off at a time, and the
per-assist table that says what each one is worth.

``keel eval --arms configured,off,families`` runs the same cases once per arm, each arm in its own folder
(``OUT/<arm>/``, resumable like any eval); ``assist_tables`` reads the records back: per arm, solved,
false done, steps, wall time and the times each assist acted; per assist, what switching its family off
did; and the cases that flipped against the configured arm, with their stop reasons and the assists that
acted in the configured run (why it flipped, as far as the events tell).

Pure over records (keel.eval.execute's dicts), apart from the arm folders' names.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from keel.core.assists import ASSISTS, FAMILIES, NAMES, family_members

CONFIGURED = "configured"


@dataclass(frozen=True)
class Arm:
    label: str        # configured, off, no-<family>, with-<assist>
    assists: str      # `keel run --assists SPEC` ("" for the configuration as it is)


def parse_arms(spec: str) -> list[Arm]:
    """``configured,off,families`` (families: one arm per family off), ``no-<family>`` items, or
    ``with-<assist>``: the configuration plus one assist switched on (an assist off everywhere until an
    A/B run measures it, as claim_repair)."""
    arms: list[Arm] = []
    for item in (part.strip() for part in spec.split(",") if part.strip()):
        if item == CONFIGURED:
            arms.append(Arm(CONFIGURED, ""))
        elif item == "off":
            arms.append(Arm("off", "off"))
        elif item == "families":
            arms += [_family_off(f) for f in FAMILIES]
        elif item.startswith("no-") and item[3:] in FAMILIES:
            arms.append(_family_off(item[3:]))
        elif item.startswith("with-") and item[5:] in NAMES:
            arms.append(Arm(item, f"{item[5:]}=on"))
        else:
            raise ValueError(f"unknown arm {item!r}: use configured, off, families, no-<family> or "
                             f"with-<assist> (families: {', '.join(FAMILIES)})")
    return list({a.label: a for a in arms}.values())


def _family_off(family: str) -> Arm:
    return Arm(f"no-{family}", ",".join(f"{name}=off" for name in sorted(family_members([family]))))


# -- the tables -------------------------------------------------------------------------------------
def _case(r: Mapping[str, Any]) -> str:
    return str((r.get("case") or {}).get("id") or "")


def _acted(r: Mapping[str, Any]) -> dict[str, int]:
    return dict((r.get("metrics") or {}).get("assists_acted") or {})


def arm_row(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    solved = [r for r in records if r.get("outcome") == "success"]
    walls = [float((r.get("metrics") or {}).get("wall_s") or 0) for r in solved]
    steps = [int((r.get("metrics") or {}).get("steps") or 0) for r in records]
    acted: dict[str, int] = {}
    for r in records:
        for name, n in _acted(r).items():
            acted[name] = acted.get(name, 0) + n
    return {"runs": len(records), "solved": len(solved),
            "false_done": sum(1 for r in records if r.get("outcome") == "false_done"),
            "steps": statistics.median(steps) if steps else None,
            "wall_solved": round(statistics.median(walls), 1) if walls else None,
            "wall_total": round(sum(float((r.get("metrics") or {}).get("wall_s") or 0) for r in records), 1),
            "acted": acted}


def flips(base: Sequence[Mapping[str, Any]], other: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Cases solved in one arm and not the other (first repeat of each), with what the events say."""
    mine = {_case(r): r for r in base}
    out = []
    for r in other:
        b = mine.get(_case(r))
        if b is None or (b.get("outcome") == "success") == (r.get("outcome") == "success"):
            continue
        out.append({"case": _case(r), "configured": b.get("outcome"), "arm": r.get("outcome"),
                    "stops": (b.get("stop_reason"), r.get("stop_reason")), "acted": _acted(b)})
    return sorted(out, key=lambda f: f["case"])


def assist_tables(by_arm: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """Markdown: the arms, the assists, and the flips against the configured arm."""
    rows = {label: arm_row(records) for label, records in by_arm.items()}
    lines = ["| arm | runs | solved | false done | median steps | median wall, solved (s) | wall, all (s) | assists acted |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for label, row in rows.items():
        acted = ", ".join(f"{k} {v}" for k, v in sorted(row["acted"].items())) or "–"
        lines.append(f"| {label} | {row['runs']} | {row['solved']} | {row['false_done']} | {row['steps']} | "
                     f"{row['wall_solved'] if row['wall_solved'] is not None else '–'} | {row['wall_total']} | {acted} |")
    base = by_arm.get(CONFIGURED)
    if base is not None:
        lines += ["", "| assist | family | acted (configured: times, cases) | with its family off: solved, false done, "
                  "median steps, median wall solved | flips |", "|---|---|---|---|---|"]
        for a in ASSISTS:
            times = sum(_acted(r).get(a.name, 0) for r in base)
            cases = sum(1 for r in base if _acted(r).get(a.name))
            off = rows.get(f"no-{a.family}")
            off_text = (f"{off['solved']}, {off['false_done']}, {off['steps']}, {off['wall_solved'] or '–'}"
                        if off is not None else "not run")
            flipped = flips(base, by_arm[f"no-{a.family}"]) if off is not None else []
            lines.append(f"| {a.name} | {a.family} | {times}, {cases} | {off_text} | "
                         f"{', '.join(f['case'] for f in flipped) or '–'} |")
        flip_lines = [f"- {label}: **{f['case']}** {f['configured']} → {f['arm']} (stops: {f['stops'][0]} → "
                      f"{f['stops'][1]}; acted in the configured run: "
                      f"{', '.join(f'{k} {v}' for k, v in sorted(f['acted'].items())) or 'none'})"
                      for label, records in by_arm.items() if label != CONFIGURED for f in flips(base, records)]
        lines += ["", "Cases that flipped against the configured arm:", *(flip_lines or ["- none"])]
    return "\n".join(lines)
