"""keel on a real small model, in process, against mini-swe-agent on the same GGUF.

    python bench/real_engine.py --model /path/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --cases py-wrong-operator,py-off-by-one --agents keel-constrained,keel-free,mini-swe-agent \
        --max-steps 12 --timeout 1800 --threads 1 --out /tmp/real_engine.json [--resume]

Each case of ``evals/`` runs in a fresh workspace (keel.eval.cases.materialize), one case at a
time, temperature 0, the same step limit for every agent, and is graded by the case's acceptance
commands (keel.eval.cases.grade). keel runs as ``keel run --local MODEL`` (no server) with
``[engine] constrain_tool_calls`` on or off (keel-constrained, keel-free; both with the small profile
that ``--local`` picks) or with the full tool set and prompt (keel-full); mini-swe-agent (default configuration) talks to
``python -m llama_cpp.server`` started here on 127.0.0.1 with the same GGUF, context and threads,
and stopped afterwards. Metrics come from keel.eval.metrics, so both agents are counted alike:
success, false done, steps, idle turns, invalid/recovered calls, prompt tokens and the cached
share, wall time. On a shared 2-core machine a case takes tens of minutes: this is a bench, not
a test.

Each keel row also carries a phase breakdown from its events log (``phases``): the first model call
(model load excluded: the engine is built before it), later model calls, change_file's editor
requests, the rest of the tools, with prompt tokens evaluated and tokens/s where known.

``--first-reply N`` measures the warm start instead (issue 24): for each case, N rounds of four
fresh ``keel run --local`` processes in one project, interleaved in one batch: the prefix cache
off, on and empty (it saves), on and filled with the same task (the whole first prompt is
restored), on with another task (only the static prefix is). Each is timed from launch to
``session_start`` (imports, config, model load), to the first streamed reply token, and to the
end of the first model call; --max-steps 1, verification off. The machine's load is printed.

``--compare`` runs keel-constrained on each case twice in one batch, with issue 24's changes off
("before": 1 thread, which was the default of half the CPUs on this 2-core machine; no prefix cache;
no prompt lookup) and on ("after": today's defaults, the prefix cache filled beforehand by one run of
another task in another project, as a person's earlier run would have), which goes first alternating
by case; then solved cases, false done and the median wall time per solved case of each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from keel.eval.cases import grade, load_case, materialize  # noqa: E402
from keel.eval.job import AgentRun, JobSpec, last_json_object, run_process  # noqa: E402
from keel.eval.metrics import outcome, run_metrics  # noqa: E402

AGENTS = ("keel-constrained", "keel-free", "keel-full", "mini-swe-agent")
SERVER_ALIAS = "local-gguf"


# --compare: issue 24's changes off ("before": the defaults they replaced — half the CPUs' threads,
# which is 1 on this 2-core machine, no prefix cache, no prompt lookup) and on ("after": today's defaults,
# the prefix cache filled by one earlier run of another task in another project).
BEFORE = {"local_threads": 1, "local_prefix_cache_mb": 0, "local_lookup": '"off"'}


def keel_config(home: Path, args: argparse.Namespace, constrain: bool = True, profile: str = "auto",
                cache_mb: int | None = None, extra: dict[str, Any] | None = None) -> Path:
    config_home = home / "xdg"
    (config_home / "keel").mkdir(parents=True, exist_ok=True)
    settings = {**({"local_threads": args.threads} if args.threads else {}),
                **({"local_prefix_cache_mb": cache_mb} if cache_mb is not None else {}), **(extra or {})}
    (config_home / "keel" / "config.toml").write_text(
        f'[engine]\nconstrain_tool_calls = "{"on" if constrain else "off"}"\nprofile = "{profile}"\n'
        f"local_context = {args.context}\ntemperature = 0.0\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
    return config_home


def run_keel_local(case: Any, workspace: Path, tmp: Path, args: argparse.Namespace, constrain: bool,
                   profile: str = "auto", extra: dict[str, Any] | None = None, home: Path | None = None) -> AgentRun:
    log = tmp / "session.jsonl"
    config_home = keel_config(tmp, args, constrain, profile, extra=extra)
    cmd = [sys.executable, "-m", "keel.cli.main", "run", "--task-file", str(case.path / "task.md"),
           "--cwd", str(workspace), "--local", str(args.model), "--output-format", "json", "--log", str(log),
           "--max-steps", str(args.max_steps), "--max-seconds", f"{args.timeout:g}"]
    env = {**os.environ, "KEEL_HOME": str(home or tmp / "keel-home"), "XDG_CONFIG_HOME": str(config_home),
           "PYTHONPATH": str(ROOT)}
    code, stdout, stderr, timed_out = run_process(cmd, cwd=workspace, env=env, timeout_s=args.timeout + 120)
    log_text = log.read_text(encoding="utf-8") if log.exists() else ""
    events = [json.loads(line) for line in log_text.splitlines() if line.strip()]
    result = last_json_object(stdout)
    if timed_out:
        return AgentRun("incomplete", "harness_timeout", result, events, log_text, None, code)
    if result is None:
        return AgentRun(None, None, None, events, log_text, f"keel exited {code}: {stderr.strip()[-1500:]}", code)
    return AgentRun(result.get("status"), result.get("stop_reason"), result, events, log_text,
                    result.get("error") if result.get("status") == "error" else None, code)


def exit_on_term() -> None:
    """Make SIGTERM (``kill``, ``pkill``) end a batch as Ctrl-C does: through its ``finally`` blocks, so the
    llama_cpp.server it started is stopped too. Measured: a batch ended with pkill left its server
    generating at 180% CPU, under the next batch's first runs."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


@contextlib.contextmanager
def llama_server(args: argparse.Namespace, extra: tuple[str, ...] = ()):
    """``python -m llama_cpp.server`` on a free 127.0.0.1 port, for the peer; always stopped; ``extra``:
    more of the server's own arguments. It needs the server's own packages: pip install
    'llama-cpp-python[server]'."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, str(ROOT / "bench" / "_llama_server.py"), "--model", str(args.model), "--model_alias", SERVER_ALIAS,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(args.context)]
    if args.threads:
        cmd += ["--n_threads", str(args.threads), "--n_threads_batch", str(args.threads)]
    cmd += extra
    log = open(Path(tempfile.gettempdir()) / f"keel-bench-llama-server-{port}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"llama_cpp.server exited {proc.returncode}; see {log.name}")
            try:
                urllib.request.urlopen(f"{base}/models", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("llama_cpp.server did not come up in 300 s") from None
                time.sleep(1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def run_dir(case_id: str) -> Path:
    """The same folder for every run of a case: its path is in the prompts (the workspace, check logs),
    and a random one made a case's runs differ at temperature 0 — the 1.5B model's first call changed
    with the path's tokens alone, so two arms of a comparison differed where no rule of theirs acted."""
    tmp = Path(tempfile.gettempdir()) / "keel-real" / case_id
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def run_case(case_id: str, agent: str, args: argparse.Namespace, base_url: str | None,
             variant: str | None = None) -> dict[str, Any]:
    case = load_case(ROOT / "evals" / case_id)
    tmp = run_dir(case_id)
    started = time.monotonic()
    try:
        workspace = materialize(case, tmp / "workspace")
        if agent == "mini-swe-agent":
            from keel.eval.peer import run_peer

            spec = JobSpec(case_id=case_id, case_dir=str(case.path), agent=agent, engine="live",
                           base_url=base_url, model=SERVER_ALIAS, max_steps=args.max_steps,
                           timeout_s=args.timeout)
            run = run_peer(spec, case, workspace, tmp)
        else:
            extra, home = ((BEFORE, None) if variant == "before" else
                           ({}, args.shared_home) if variant == "after" else (None, None))
            run = run_keel_local(case, workspace, tmp, args, constrain=agent != "keel-free",
                                 profile="full" if agent == "keel-full" else "auto", extra=extra, home=home)
        graded = grade(case, workspace, answer=str((run.result or {}).get("summary") or ""))   # question cases
        metrics = run_metrics(run.result, run.events)
        cuts = sum(1 for e in run.events if e.get("type") == "model_call" and e.get("finish_reason") == "length")
        phase_cols = {"phases": phases(run.events), "acted": acted(run.events)} if agent != "mini-swe-agent" else {}
        if args.logs and run.log_text:   # the run's events, for reading it later without its workspace
            args.logs.mkdir(parents=True, exist_ok=True)
            (args.logs / f"{case_id}.{agent}{'.' + variant if variant else ''}.jsonl").write_text(run.log_text)
        threads = next((e.get("engine_setup", {}).get("threads") for e in run.events
                        if e.get("type") == "session_start"), None)
        return {"case": case_id, "agent": agent, **({"variant": variant, "threads": threads} if variant else {}),
                "status": run.status, "stop_reason": run.stop_reason,
                "outcome": outcome(run.status, graded.passed, run.error), "passed": graded.passed,
                "error": run.error, "cut_replies": cuts, "wall_s": round(time.monotonic() - started, 1),
                **{k: metrics[k] for k in ("steps", "tool_calls", "idle_turns", "invalid_calls", "recovered_calls",
                                           "malformed_turns", "prompt_tokens", "cached_tokens", "cached_share",
                                           "same_replies_in_row")},
                **phase_cols}
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


PROBE_COMMANDS = ("node -e 'const assert", "python3 -c 'import sys")   # keel.verify.probes' checks


def acted(events: list[dict[str, Any]]) -> dict[str, int]:
    """How often each of issue 25's rules acted in a keel run (from its events): variant requests (and
    those that took tools away), editor requests for a file other than the one named (a test's change
    redirected), contract reviews, file moves, renames carried word for word to other files, and runs
    of the comments' probes by the gate. A run where none acted is, at
    temperature 0, the run the code without those rules makes."""
    calls = [e for e in events if e.get("type") == "model_call"]
    named: dict[int, set[str]] = {}
    for e in events:
        if e.get("type") == "tool_call" and e.get("name") == "change_file":
            with contextlib.suppress(json.JSONDecodeError, AttributeError):
                named.setdefault(e.get("step", 0), set()).add(str(json.loads(e.get("arguments") or "{}").get("path")))

    results = [str(e.get("result_preview") or "") for e in events if e.get("type") == "tool_call"]

    def other(e: dict[str, Any]) -> bool:   # the model may name the file by its absolute path
        path = str(e.get("path"))
        return not any(n == path or n.endswith("/" + path) for n in named.get(e.get("step", 0), set()))

    return {"variants": sum(1 for e in calls if e.get("variant")),
            "avoided": sum(1 for e in calls if (e.get("variant") or {}).get("avoid")),
            "other_file_edits": sum(1 for e in events if e.get("type") == "change_request" and other(e)),
            "contract_reviews": sum(1 for e in events if e.get("type") == "decision"
                                    and e.get("pushback_kind") == "contract_review"),
            "moves": sum(1 for e in results if e.startswith("Moved ")),
            "renamed_elsewhere": sum(1 for e in results if "in the other files that used it too" in e),
            "probe_checks": sum(1 for e in events if e.get("type") == "verification" for c in e.get("checks") or []
                                if str(c.get("command", "")).startswith(PROBE_COMMANDS))}


def phases(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Where a keel run's time went, from its events log: seconds, prompt tokens evaluated (not
    cached) and generated tokens per phase, and the generation speed of the model calls."""
    calls = [e for e in events if e.get("type") == "model_call"]
    edits = [e for e in events if e.get("type") == "change_request"]
    tools = [e for e in events if e.get("type") == "tool_call"]

    def part(items: list[dict[str, Any]]) -> dict[str, Any]:
        u = [e.get("usage") or {} for e in items]
        return {"n": len(items), "s": round(sum(e.get("latency_s") or 0 for e in items), 1),
                "evaluated": sum((x.get("prompt_tokens") or 0) - (x.get("cached_tokens") or 0) for x in u),
                "generated": sum(x.get("completion_tokens") or 0 for x in u)}

    edit_s = sum(e.get("latency_s") or 0 for e in edits)
    return {"first_call": part(calls[:1]), "later_calls": part(calls[1:]), "editor_requests": part(edits),
            "tools_s": round(sum(e.get("elapsed_ms") or 0 for e in tools) / 1000 - edit_s, 1)}


def first_reply(case_id: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The warm-start rounds of --first-reply (see the module docstring)."""
    case = load_case(ROOT / "evals" / case_id)
    tmp = Path(tempfile.mkdtemp(prefix=f"keel-first-{case_id}-"))
    rows = []
    try:
        workspace = materialize(case, tmp / "workspace")
        for round_ in range(args.first_reply):
            shutil.rmtree(tmp / "home-on", ignore_errors=True)   # each round starts with an empty cache
            for label, home, cache_mb in (("off", "home-off", 0), ("on-empty", "home-on", 512),
                                          ("on-same-task", "home-on", 512), ("on-other-task", "home-on", 512)):
                task = OTHER_TASK if label == "on-other-task" else None
                row = timed_first_call(case, workspace, tmp / home, args, cache_mb, task)
                row.update(case=case_id, round=round_, cache=label, load=os.getloadavg()[0])
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return rows


OTHER_TASK = "Explain in two sentences what the code in this project does."


def timed_first_call(case: Any, workspace: Path, home: Path, args: argparse.Namespace, cache_mb: int,
                     task: str | None = None, keel_home: Path | None = None) -> dict[str, Any]:
    config_home = keel_config(home, args, cache_mb=cache_mb)
    cmd = [sys.executable, "-m", "keel.cli.main", "run", *([task] if task else ["--task-file", str(case.path / "task.md")]),
           "--cwd", str(workspace), "--local", str(args.model), "--output-format", "stream-json",
           "--max-steps", "1", "--verify", "off", "--max-seconds", f"{args.timeout:g}"]
    env = {**os.environ, "KEEL_HOME": str(keel_home or home / "keel-home"), "XDG_CONFIG_HOME": str(config_home),
           "PYTHONPATH": str(ROOT)}
    marks: dict[str, float] = {}
    first: dict[str, Any] = {}
    started = time.monotonic()
    err = home / "stderr.txt"
    with err.open("w") as err_fh:
        proc = subprocess.Popen(cmd, cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=err_fh,
                                stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            kind = event.get("type")
            if kind == "session_start":
                marks["start"] = time.monotonic() - started
                first["setup"] = event.get("engine_setup")
            elif kind == "assistant_delta" and event.get("kind") == "content" and "token" not in marks:
                marks["token"] = time.monotonic() - started
            elif kind == "model_call" and "call" not in marks:
                marks["call"] = time.monotonic() - started
                first["usage"] = event.get("usage")
    if proc.wait() != 0 and "call" not in marks:
        first["error"] = err.read_text(errors="replace")[-600:]
    return {"to_session_start_s": round(marks.get("start", -1), 2), "to_first_token_s": round(marks.get("token", -1), 2),
            "to_first_call_end_s": round(marks.get("call", -1), 2), **first}


def compare(args: argparse.Namespace) -> int:
    """--compare: each case "before" and "after" in turn (which goes first alternates), after one
    warm-up run of another task fills the "after" prefix cache; then the median wall time per solved case."""
    args.shared_home = Path(tempfile.mkdtemp(prefix="keel-compare-home-"))
    warm = load_case(ROOT / "evals" / "py-config-default")
    with tempfile.TemporaryDirectory() as tmp:   # a person's earlier run, another task in another project
        timed_first_call(warm, materialize(warm, Path(tmp) / "ws"), Path(tmp), args, 512, OTHER_TASK,
                         keel_home=args.shared_home)
    rows = []
    for i, case_id in enumerate(c for c in args.cases.split(",") if c):
        for variant in (("before", "after") if i % 2 == 0 else ("after", "before")):
            row = run_case(case_id, "keel-constrained", args, None, variant)
            row["load"] = os.getloadavg()[0]
            rows.append(emit(row, args))
    print(table(rows))
    medians = {}
    for variant in ("before", "after"):
        solved = [r["wall_s"] for r in rows if r.get("variant") == variant and r["outcome"] == "success"]
        false_done = sum(1 for r in rows if r.get("variant") == variant and r["outcome"] == "false_done")
        medians[variant] = statistics.median(solved) if solved else None
        print(f"{variant}: solved {len(solved)}, false done {false_done}, "
              f"median wall per solved case {medians[variant]} s")
    if medians["before"] and medians["after"]:   # issue 24's target: at most 0.5
        print(f"after/before: {medians['after'] / medians['before']:.2f}x")
    shutil.rmtree(args.shared_home, ignore_errors=True)
    return 0


def emit(row: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Print one row as it comes, and append it to --out: a long batch cut short keeps its rows."""
    print(json.dumps(row), flush=True)
    if args.out:
        with args.out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
    return row


def _done_rows(out: Path | None) -> dict[tuple[str, str], dict[str, Any]]:
    """The rows an earlier, interrupted batch wrote to --out, by (case, agent)."""
    if out is None or not out.is_file():
        return {}
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return {(r["case"], r["agent"]): r for r in rows if "case" in r and "agent" in r and "variant" not in r}


def table(rows: list[dict[str, Any]]) -> str:
    head = ("case", "agent", "outcome", "stop", "steps", "idle", "invalid", "recov", "cut", "same", "prompt",
            "cached", "wall_s")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        share = f"{r['cached_share']:.0%}" if r.get("cached_share") is not None else "-"
        lines.append(" | ".join(str(x) for x in (r["case"], r["agent"], r["outcome"], r["stop_reason"], r["steps"],
                                                  r["idle_turns"], r["invalid_calls"], r["recovered_calls"],
                                                  r["cut_replies"], r.get("same_replies_in_row"), r["prompt_tokens"],
                                                  share, r["wall_s"])))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True, help="the GGUF file")
    p.add_argument("--cases", default="py-wrong-operator,py-off-by-one,py-config-key")
    p.add_argument("--agents", default=",".join(AGENTS))
    p.add_argument("--max-steps", type=int, default=12)
    p.add_argument("--timeout", type=float, default=1800.0, help="wall-clock limit per run, seconds")
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", type=Path, help="append each row as a JSON line here")
    p.add_argument("--keep", action="store_true", help="keep the workspaces")
    p.add_argument("--logs", type=Path, help="save each keel run's events log in this folder")
    p.add_argument("--resume", action="store_true",
                   help="skip the (case, agent) rows --out already holds: a long batch cut short goes on")
    p.add_argument("--first-reply", type=int, default=0, metavar="N",
                   help="measure N rounds of warm starts (prefix cache off / empty / filled) instead")
    p.add_argument("--compare", action="store_true",
                   help="keel-constrained with issue 24's changes off and on, case by case, in one batch")
    args = p.parse_args(argv)
    if args.first_reply:
        print(f"load before: {os.getloadavg()}", flush=True)
        for case_id in [c for c in args.cases.split(",") if c]:
            first_reply(case_id, args)
        print(f"load after: {os.getloadavg()}", flush=True)
        return 0
    if args.compare:
        return compare(args)
    agents = [a for a in args.agents.split(",") if a]
    unknown = set(agents) - set(AGENTS)
    if unknown:
        p.error(f"unknown agents {sorted(unknown)}; choose from {AGENTS}")
    rows = []
    done = _done_rows(args.out) if args.resume else {}
    rows += list(done.values())
    with contextlib.ExitStack() as stack:
        base_url = stack.enter_context(llama_server(args)) if "mini-swe-agent" in agents else None
        for case_id in [c for c in args.cases.split(",") if c]:
            for agent in [a for a in agents if (case_id, a) not in done]:
                rows.append(emit(run_case(case_id, agent, args, base_url), args))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
