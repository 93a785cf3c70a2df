"""One eval job: a case in a fresh temporary workspace, run by an agent, graded, measured.

``run_job`` is a top-level function over a plain, picklable ``JobSpec`` so the same code runs in a
local process pool and as a Ray task. It returns the record and the run's event log as text instead
of writing into the output folder, because a Ray worker may sit on another machine: the driver
writes both. keel itself runs as a ``keel run`` subprocess, exactly as a user would start it — same
config loading, sandbox, policy and verification gate.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from keel.core.events import data_dir
from keel.eval.cases import Case, CaseError, Grade, case_summary, grade, load_case, materialize
from keel.eval.job import (
    HARNESS_GRACE_S,
    KEEL,
    AgentRun,
    JobSpec,
    keel_pythonpath,
    last_json_object,
    result_key,
    run_process,
)
from keel.eval.metrics import outcome, run_metrics

SCHEMA = 1
__all__ = ["KEEL", "AgentRun", "JobOutput", "JobSpec", "keel_pythonpath", "last_json_object", "pack_case",
           "result_key", "run_job", "run_process"]


def pack_case(case_dir: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(case_dir, arcname=case_dir.name)
    return buf.getvalue()


def _unpack_case(archive: bytes, dest: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
        top = tar.getnames()[0].split("/")[0]
    return dest / top


@dataclass
class JobOutput:
    record: dict[str, Any]
    log_text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_job(spec: JobSpec) -> JobOutput:
    """Never raises for a case's or an agent's failure: that is a record with outcome ``error``."""
    started = time.monotonic()
    tmp = job_folder(spec)
    base: dict[str, Any] = {"schema": SCHEMA, "key": spec.key, "case": {"id": spec.case_id},
                            "repeat": spec.repeat, "agent": spec.agent, **_engine_fields(spec)}
    try:
        case_dir = _unpack_case(spec.case_archive, tmp / "case") if spec.case_archive else Path(spec.case_dir)
        case = load_case(case_dir)
        base["case"] = case_summary(case)
        workspace = materialize(case, tmp / "workspace")
        if spec.agent == KEEL:
            run = _run_keel(spec, case, workspace, tmp)
        else:
            from keel.eval.peer import run_peer

            run = run_peer(spec, case, workspace, tmp)
        graded = grade(case, workspace, answer=str((run.result or {}).get("summary") or ""))
        record = _record(base, run, graded, time.monotonic() - started)
        if spec.keep_workspace:
            record["workspace"] = str(workspace)
        return JobOutput(record, run.log_text)
    except Exception as exc:  # a broken case, a crashed agent, a harness bug: one error record, not a dead eval
        if not isinstance(exc, CaseError | OSError | subprocess.SubprocessError | ValueError):
            import traceback

            exc = RuntimeError(traceback.format_exc(limit=-3).strip())
        return JobOutput({**base, "status": None, "stop_reason": None, "passed": False, "outcome": "error",
                          "false_done": False, "error": f"{type(exc).__name__}: {exc}", "grade": None,
                          "metrics": {"wall_s": round(time.monotonic() - started, 3)},
                          "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    finally:
        if not spec.keep_workspace:
            shutil.rmtree(tmp, ignore_errors=True)


def job_folder(spec: JobSpec) -> Path:
    """Where the job runs. With the in-process engine, the same folder for every run of a case (its paths
    are in the prompts, and at temperature 0 a path alone changed a 1.5B model's first reply, so two arms
    of a comparison differed where no assist acted); else a fresh temporary one."""
    if spec.engine != "local":
        return Path(tempfile.mkdtemp(prefix=f"keel-eval-{spec.case_id}-"))
    folder = Path(tempfile.gettempdir()) / "keel-eval-same" / f"{spec.case_id}-r{spec.repeat}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def share_prefix_cache(home: Path) -> None:
    """The in-process engine's prefix cache (keel.engine.local_prefix) in a job's own data dir ``home`` is
    the person's own, as every ``keel run --local`` of theirs finds it: a run's first step then restores
    the static prefix (system prompt and tools) instead of reading it, ~20 s of 2k tokens on the 1.5B here.
    The replies are the same either way (the prefix is read in the same pieces with the cache off); only
    the wall time differs, and a cold cache is not what a person who has run keel once has."""
    shared = data_dir() / "prefix-cache"
    shared.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "prefix-cache").symlink_to(shared, target_is_directory=True)


def _engine_fields(spec: JobSpec) -> dict[str, Any]:
    return {"engine": spec.engine, "model": spec.model if spec.engine != "scripted" else "scripted",
            **({"assists": spec.assists} if spec.assists else {})}


def _record(base: dict[str, Any], run: AgentRun, graded: Grade, wall_s: float) -> dict[str, Any]:
    error = run.error
    if error is None and run.status in (None, "error"):
        error = str((run.result or {}).get("error") or "the agent ended in an error")
    metrics = run_metrics(run.result, run.events)
    metrics["wall_s"] = round(wall_s, 3)
    word = outcome(run.status, graded.passed, error)
    return {**base, "status": run.status, "stop_reason": run.stop_reason, "exit_code": run.exit_code,
            "summary": str((run.result or {}).get("summary") or "")[:500], "passed": graded.passed,
            "outcome": word, "false_done": word == "false_done", "error": error, "grade": graded.to_dict(),
            "metrics": metrics, "serving": (run.result or {}).get("serving"),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def scripted_server(case: Case) -> Any:
    from keel.testing.server import ScriptedEngineServer

    if case.script_path is None:
        raise CaseError(f"{case.path}: no script.jsonl, so it cannot run with --engine scripted")
    return ScriptedEngineServer(case.script_path, canned_probes=True)


def _run_keel(spec: JobSpec, case: Case, workspace: Path, tmp: Path) -> AgentRun:
    log = tmp / "session.jsonl"
    with contextlib.ExitStack() as stack:
        if spec.engine == "scripted":
            server = stack.enter_context(scripted_server(case))
            base_url, model = server.base_url, server.model
        else:
            base_url, model = spec.base_url or "", spec.model or ""
        engine = ["--local", model] if spec.engine == "local" else ["--base-url", base_url, "--model", model]
        cmd = [sys.executable, "-m", "keel.cli.main", "run", "--task-file", str(case.path / "task.md"),
               "--cwd", str(workspace), *engine, "--output-format", "json",
               "--log", str(log), "--max-steps", str(spec.max_steps), "--max-seconds", f"{spec.timeout_s:g}"]
        if spec.assists:
            cmd += ["--assists", spec.assists]
        if spec.api_key_env:
            cmd += ["--api-key-env", spec.api_key_env]
        # keel's data dir (the gate's restored-test copies, …) is the job's own, like its workspace.
        env = {**os.environ, "KEEL_HOME": str(tmp / "keel-home"), "PYTHONPATH": keel_pythonpath()}
        if spec.engine == "local":
            share_prefix_cache(tmp / "keel-home")
        code, stdout, stderr, timed_out = run_process(cmd, cwd=workspace, env=env,
                                                      timeout_s=spec.timeout_s + HARNESS_GRACE_S)
    log_text = log.read_text(encoding="utf-8") if log.exists() else ""
    events = [json.loads(line) for line in log_text.splitlines() if line.strip()]
    result = last_json_object(stdout)
    if timed_out:  # keel overran its own --max-seconds: the agent's failure to stop, graded as such
        return AgentRun("incomplete", "harness_timeout", result, events, log_text, None, code)
    if result is None:
        return AgentRun(None, None, None, events, log_text,
                        f"keel run exited {code} without a result object: {stderr.strip()[-2000:]}", code)
    return AgentRun(result.get("status"), result.get("stop_reason"), result, events, log_text,
                    result.get("error") if result.get("status") == "error" else None, code)


