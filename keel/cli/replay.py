"""``keel replay LOG [--case CASE | --cwd DIR] [--to-script FILE] [--json]``.

Re-serves a recorded run's model outputs through the scripted engine to a ``keel run`` in a fresh
copy of the starting workspace, then lists where tool observations, pushbacks or the stop differ
from the recording. ``--to-script FILE`` writes those outputs as a script.jsonl (alone, it only
writes the file). The starting workspace is an eval case (``--case``, also inferred from an eval
log's name ``<case>__keel__r<k>.jsonl``) or a copy of ``--cwd``.
Exit codes: 0 the replay matches, 1 it differs, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.cli.usage import RaisingParser, UsageError

if TYPE_CHECKING:
    from keel.eval.cases import Case
    from keel.eval.replay import Recorded

EXIT_USAGE = 2


def _parser() -> RaisingParser:
    p = RaisingParser(prog="keel replay", description="Re-feed a recorded run's model outputs to today's keel.")
    p.add_argument("log", type=Path, help="a session log (JSONL): keel's data dir, --log, or an eval's logs/")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--case", help="start from this eval case (id under --cases-dir, or a case folder)")
    source.add_argument("--cwd", type=Path, help="start from a copy of this directory (its state before the run)")
    p.add_argument("--cases-dir", type=Path, help="where case folders live (default: ./evals)")
    p.add_argument("--to-script", type=Path, metavar="FILE", help="write the recorded outputs as script.jsonl")
    p.add_argument("--json", action="store_true", help="print the differences as JSON")
    p.add_argument("--keep", action="store_true", help="keep the replay's workspace and log (paths printed)")
    return p


def replay_main(argv: list[str]) -> int:
    try:
        return _replay(_parser().parse_args(argv))
    except UsageError as e:
        print(f"keel replay: {e}", file=sys.stderr)
        return EXIT_USAGE


def _replay(args: argparse.Namespace) -> int:
    from keel.eval.replay import ReplayError, recorded_turns, to_script_lines

    log: Path = args.log
    try:
        events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
        recorded = recorded_turns(events)
    except OSError as e:
        raise UsageError(f"cannot read {log}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{log}: not JSON Lines ({e.msg} at line {e.lineno})") from None
    except ReplayError as e:
        raise UsageError(f"{log}: {e}") from None
    if recorded.truncated_arguments:
        print(f"keel replay: warning: {recorded.truncated_arguments} call(s) come from an older log whose "
              "arguments were cut at 4000 characters", file=sys.stderr)
    script_file = args.to_script
    if script_file is not None:
        script_file.write_text(to_script_lines(recorded.steps), encoding="utf-8")
        print(f"wrote {len(recorded.steps)} turn(s) to {script_file}", file=sys.stderr)
    case = _case(args, log)
    cwd: Path | None = args.cwd
    if case is None and cwd is None:
        if script_file is not None:
            return 0
        raise UsageError("say where the run started: --case CASE or --cwd DIR (a copy is used)")
    return _run_replay(args, events, recorded, case, cwd)


def _case(args: argparse.Namespace, log: Path) -> Case | None:
    from keel.eval.cases import CaseError, load_case, load_cases

    name: str | None = args.case
    from keel.cli.eval import default_cases_dir

    cases_dir: Path = args.cases_dir or default_cases_dir()
    try:
        if name is not None:
            if (Path(name) / "case.toml").is_file():
                return load_case(name)
            return load_cases(cases_dir, [name])[0]
        if args.cwd is None and "__" in log.stem and (cases_dir / log.stem.split("__")[0]).is_dir():
            return load_case(cases_dir / log.stem.split("__")[0])
    except CaseError as e:
        raise UsageError(str(e)) from None
    return None


def _run_replay(args: argparse.Namespace, events: list[dict[str, Any]], recorded: Recorded, case: Case | None,
                cwd: Path | None) -> int:
    from keel.eval.cases import materialize
    from keel.eval.job import keel_pythonpath, last_json_object, run_process
    from keel.eval.replay import candidates_of, compare_runs, format_differences, replay_config, stop_of
    from keel.testing.server import ScriptedEngineServer

    steps = recorded.steps
    tmp = Path(tempfile.mkdtemp(prefix="keel-replay-"))
    workspace = tmp / "workspace"
    try:
        if case is not None:
            materialize(case, workspace)
            origin = f"case {case.id}"
        else:
            assert cwd is not None
            if not cwd.is_dir():
                raise UsageError(f"--cwd {cwd}: no such directory")
            shutil.copytree(cwd, workspace, symlinks=True)
            origin = f"a copy of {cwd}"
        task_file = tmp / "task.md"
        task_file.write_text(recorded.task or "(no task recorded)", encoding="utf-8")
        new_log = tmp / "replay.jsonl"
        with ScriptedEngineServer(steps, canned_probes=True) as server:
            cmd = [sys.executable, "-m", "keel.cli.main", "run", "--task-file", str(task_file), "--cwd", str(workspace),
                   "--base-url", server.base_url, "--model", server.model, "--output-format", "json",
                   "--log", str(new_log), "--max-steps", str(recorded.turns)]
            env = {**os.environ, "KEEL_HOME": str(tmp / "keel-home"), "PYTHONPATH": keel_pythonpath()}
            if config := replay_config(events):   # the small profile and its assists, as recorded
                (tmp / "config" / "keel").mkdir(parents=True)
                (tmp / "config" / "keel" / "config.toml").write_text(config, encoding="utf-8")
                env["XDG_CONFIG_HOME"] = str(tmp / "config")
            code, stdout, stderr, _ = run_process(cmd, cwd=workspace, env=env, timeout_s=600)
        if not new_log.exists():
            raise UsageError(f"the replayed run left no log (exit {code}): {stderr.strip()[-1000:]}")
        replayed = [json.loads(line) for line in new_log.read_text(encoding="utf-8").splitlines() if line.strip()]
        diffs = compare_runs(events, replayed, recorded.workspace, str(workspace))
        candidates = candidates_of(replayed)
        if args.json:
            print(json.dumps({"turns": recorded.turns, "origin": origin, "recorded_stop": stop_of(events),
                              "replayed_stop": stop_of(replayed), "result": last_json_object(stdout),
                              "candidates": candidates, "differences": [d.to_json() for d in diffs]}, indent=2))
        else:
            old, new = stop_of(events), stop_of(replayed)
            print(f"keel replay: {recorded.turns} recorded turn(s) against {origin}")
            print(f"recorded: {old['status']} ({old['reason']}) after {old['steps']} step(s) · "
                  f"now: {new['status']} ({new['reason']}) after {new['steps']} step(s)")
            for step, tried in sorted(candidates.items()):   # change_file's candidates, judged again
                print(f"step {step}: candidates {', '.join(tried)}")
            print(f"{len(diffs)} difference(s)" + (":" if diffs else ": the harness observes what it did then"))
            if diffs:
                print(format_differences(diffs))
        if args.keep:
            print(f"workspace: {workspace}\nlog: {new_log}", file=sys.stderr)
        return 1 if diffs else 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
