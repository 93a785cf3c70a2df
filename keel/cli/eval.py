"""``keel eval``: run eval cases through keel (or a peer agent), grade, measure, report.

    keel eval [CASES...] [--base-url URL --model NAME | --engine scripted | --local GGUF] [--agent NAME ...]
              [--workers N] [--repeat K] [--out DIR] [--max-steps N] [--timeout S] [--ray ADDRESS]
              [--arms configured,off,families]
    keel eval compare RUN_A RUN_B [--json]
    keel eval report DIR
    keel eval list [CASES...]

Exit codes: 0 every run succeeded, 1 some run did not (done but not claimed, failed, false done, error), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from keel.cli.guard import positive_float, positive_int
from keel.cli.usage import RaisingParser, UsageError

EXIT_USAGE = 2
AGENTS = ("keel", "mini-swe-agent")


def _run_parser() -> argparse.ArgumentParser:
    p = RaisingParser(prog="keel eval", description="Run eval cases, grade them by their acceptance, report.",
                      epilog="subcommands: `keel eval compare RUN_A RUN_B`, `keel eval report DIR`, "
                             "`keel eval list`. exit codes: 0 every run succeeded, 1 some did not, 2 usage error")
    p.add_argument("cases", nargs="*", metavar="CASE",
                   help="case ids, globs (py-*), paths to case folders, or category:X size:X tag:X language:X "
                        "(default: every case)")
    p.add_argument("--cases-dir", type=Path, help="where case folders live (default: ./evals)")
    p.add_argument("--engine", choices=["live", "scripted"], default="live",
                   help="live (default): --base-url/--model; scripted: each case's script.jsonl on 127.0.0.1")
    p.add_argument("--local", metavar="MODEL",
                   help="run keel with this GGUF in process (keel run --local), each case in the same folder "
                        "for every arm; one job at a time")
    p.add_argument("--arms", metavar="ARMS",
                   help="run the suite once per arm of assists (docs/local.md#assists): configured, off, "
                        "families (one arm per family off) or no-<family>, comma-separated; each arm in "
                        "OUT/<arm>/, then the per-assist table")
    p.add_argument("--base-url", help="the engine's OpenAI-compatible URL (default: keel's configuration)")
    p.add_argument("--model", help="model name (default: keel's configuration)")
    p.add_argument("--api-key-env", help="name of the environment variable that holds the API key")
    p.add_argument("--agent", action="append", choices=AGENTS, default=None,
                   help="who runs the cases (repeatable; default keel). mini-swe-agent is the peer")
    p.add_argument("--workers", type=positive_int, default=1, metavar="N", help="cases run in parallel")
    p.add_argument("--repeat", type=positive_int, default=1, metavar="K", help="runs per case (noise)")
    p.add_argument("--out", type=Path, help="results folder; an existing one resumes (default: eval-runs/<time>)")
    p.add_argument("--max-steps", type=positive_int, default=30, metavar="N", help="model calls per run (30)")
    p.add_argument("--timeout", type=positive_float, default=900.0, metavar="S", help="seconds per run (900)")
    p.add_argument("--temperature", type=float, default=None,
                   help="for the peer agent; keel uses its configured temperature (default 0)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run cases as Ray tasks: auto, ray://host:port, host:port, or local (start one here)")
    p.add_argument("--keep-workspaces", action="store_true", help="keep each run's workspace (path in its record)")
    return p


def eval_main(argv: list[str]) -> int:
    from keel.cli.signals import stop_on_signals

    with stop_on_signals() as stop:  # SIGTERM/SIGHUP stop an eval the way Ctrl-C does
        code = _dispatch(argv)
    return stop.exit_code(code) if code == 130 else code


def _dispatch(argv: list[str]) -> int:
    try:
        if argv and argv[0] == "compare":
            return _compare(argv[1:])
        if argv and argv[0] == "report":
            return _report(argv[1:])
        if argv and argv[0] == "list":
            return _list(argv[1:])
        return _run(_run_parser().parse_args(argv))
    except KeyboardInterrupt:
        print("keel eval: interrupted; finished jobs are saved, the same command resumes the rest", file=sys.stderr)
        return 130
    except UsageError as e:
        print(f"keel eval: {e}", file=sys.stderr)
        return EXIT_USAGE


def default_cases_dir() -> Path:
    here = Path("evals")
    if here.is_dir():
        return here
    import keel

    bundled = Path(keel.__file__).resolve().parent.parent / "evals"
    return bundled if bundled.is_dir() else here


def _load(selectors: list[str], cases_dir: Path | None) -> list[Any]:
    from keel.eval.cases import CaseError, load_cases

    try:
        return load_cases(cases_dir or default_cases_dir(), selectors)
    except CaseError as e:
        raise UsageError(str(e)) from None


def _engine_settings(args: argparse.Namespace) -> tuple[str | None, str | None, float]:
    """base_url, model and temperature as keel's own configuration resolves them (flags first)."""
    from keel.config import ConfigError, load_config

    flags = {"engine": {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env}}
    try:
        config, _ = load_config(Path.cwd(), flags=flags)
    except ConfigError as e:
        raise UsageError(f"configuration error: {e}") from None
    temperature = args.temperature if args.temperature is not None else config.engine.temperature
    return config.engine.base_url, config.engine.model, temperature


def _run(args: argparse.Namespace) -> int:
    from keel.eval.execute import JobSpec
    from keel.eval.suite import plan_jobs

    cases = _load(args.cases, args.cases_dir)
    agents = list(dict.fromkeys(args.agent or ["keel"]))
    engine = "local" if args.local else args.engine
    if args.local:
        if args.engine == "scripted" or args.base_url or "mini-swe-agent" in agents or args.ray or args.workers > 1:
            raise UsageError("--local runs keel alone, in process, one job at a time: no --engine scripted, "
                             "--base-url, --agent mini-swe-agent, --ray or --workers")
        base_url, model, temperature = None, str(Path(args.local).resolve()), args.temperature or 0.0
    elif args.engine == "scripted":
        base_url, model, temperature = None, None, args.temperature or 0.0
        missing = [c.id for c in cases if c.script_path is None]
        if missing:
            raise UsageError(f"--engine scripted needs script.jsonl in every case; missing in {', '.join(missing)}")
    else:
        base_url, model, temperature = _engine_settings(args)
        if not base_url or not model:
            raise UsageError("a live eval needs --base-url and --model (or KEEL_BASE_URL / KEEL_MODEL); "
                             "--engine scripted replays each case's script.jsonl instead")
    if "mini-swe-agent" in agents:
        from keel.eval.peer import peer_problem

        if problem := peer_problem():
            raise UsageError(problem)
    out = args.out or Path("eval-runs") / time.strftime("%Y%m%d-%H%M%S")
    template = JobSpec(case_id="", case_dir="", engine=engine, base_url=base_url, model=model,
                       api_key_env=args.api_key_env, max_steps=args.max_steps, timeout_s=args.timeout,
                       temperature=temperature, keep_workspace=args.keep_workspaces)
    if args.arms:
        return _run_arms(args, cases, template, out)
    jobs = []
    for agent in agents:  # all agents' jobs in one pool, so keel and the peer run side by side
        jobs += plan_jobs(cases, replace(template, agent=agent), args.repeat)
    mine, records = _run_jobs(args, jobs, out, f"{len(cases)} case(s) × {args.repeat} repeat(s) × {', '.join(agents)}")
    return _finish(out, records, mine)


def _run_jobs(args: argparse.Namespace, jobs: list[Any], out: Path, what: str) -> tuple[list[Any], list[Any]]:
    """Run ``jobs`` into ``out`` (resuming), with the progress bar; (this command's records, all of them)."""
    from keel.eval.progress import EvalProgress
    from keel.eval.suite import SuiteError, finished_keys, load_records, run_suite

    print(f"keel eval: {what} → {out}", file=sys.stderr)
    with EvalProgress(len(jobs)) as progress:
        done = finished_keys(out)
        progress.skip(sum(j.key in done for j in jobs))  # an earlier, interrupted eval into this --out
        try:
            run_suite(jobs, out, workers=args.workers, ray_address=args.ray, on_done=progress.landed)
        except SuiteError as e:
            raise UsageError(str(e)) from None
    records = load_records(out)
    keys = {j.key for j in jobs}
    return [r for r in records if r["key"] in keys], records


def _run_arms(args: argparse.Namespace, cases: list[Any], template: Any, out: Path) -> int:
    """Each arm of assists over the same cases, one after the other, each in OUT/<arm>/; then the tables."""
    from keel.core.files import write_atomic
    from keel.eval.arms import assist_tables, parse_arms
    from keel.eval.suite import plan_jobs

    if args.agent and set(args.agent) != {"keel"}:
        raise UsageError("--arms switches keel's assists: it runs keel alone")
    try:
        arms = parse_arms(args.arms)
    except ValueError as e:
        raise UsageError(str(e)) from None
    by_arm: dict[str, list[Any]] = {}
    for arm in arms:
        jobs = plan_jobs(cases, replace(template, assists=arm.assists), args.repeat)
        by_arm[arm.label], _ = _run_jobs(args, jobs, out / arm.label, f"arm {arm.label}: {len(cases)} case(s)")
    table = assist_tables(by_arm)
    write_atomic(out / "assists.md", (table + "\n").encode("utf-8"), make_parents=True)
    print(table)
    print(f"table: {out / 'assists.md'}", file=sys.stderr)
    every = [r for records in by_arm.values() for r in records]
    return 0 if every and all(r.get("outcome") == "success" for r in every) else 1


def _finish(out: Path, records: list[dict[str, Any]], mine: list[dict[str, Any]]) -> int:
    from keel.eval.report import summary_markdown, write_report

    md, html = write_report(out, records)
    print(summary_markdown(mine, title=f"keel eval · {out.name}"))
    print(f"report: {html}\nsummary: {md}", file=sys.stderr)
    return 0 if mine and all(r.get("outcome") == "success" for r in mine) else 1


def _compare(argv: list[str]) -> int:
    from keel.eval.compare import compare, format_compare
    from keel.eval.suite import load_records

    p = RaisingParser(prog="keel eval compare", description="Per-metric deltas and per-case flips, B against A.")
    p.add_argument("run_a", type=Path, help="the baseline eval folder (--out of an earlier run)")
    p.add_argument("run_b", type=Path, help="the eval folder to compare against it")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = p.parse_args(argv)
    sides = []
    for folder in (args.run_a, args.run_b):
        records = load_records(folder) if folder.is_dir() else []
        if not records:
            raise UsageError(f"{folder}: no eval results (expected results/*.json from `keel eval --out {folder}`)")
        sides.append(records)
    result = compare(sides[0], sides[1])
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_compare(result, str(args.run_a), str(args.run_b)), end="")
    return 0


def _report(argv: list[str]) -> int:
    from keel.eval.report import write_report
    from keel.eval.suite import load_records

    p = RaisingParser(prog="keel eval report", description="Write report.html and summary.md for an eval folder.")
    p.add_argument("out", type=Path, help="the eval folder")
    args = p.parse_args(argv)
    records = load_records(args.out) if args.out.is_dir() else []
    if not records:
        raise UsageError(f"{args.out}: no eval results (results/*.json)")
    md, html = write_report(args.out, records)
    print(f"{html}\n{md}")
    return 0


def _list(argv: list[str]) -> int:
    p = RaisingParser(prog="keel eval list", description="List the cases a selection picks.")
    p.add_argument("cases", nargs="*", metavar="CASE")
    p.add_argument("--cases-dir", type=Path)
    args = p.parse_args(argv)
    for case in _load(args.cases, args.cases_dir):
        scripted = "scripted" if case.script_path else "no script"
        print(f"{case.id:<32} {case.category:<9} {case.size:<7} {case.language:<11} {scripted:<10} {case.title}")
    return 0
