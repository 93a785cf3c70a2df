"""Run many eval jobs into an output folder: resume, parallel workers (local or Ray), progress.

The output folder holds ``run.json`` (the settings per agent), ``results/<case>__<agent>__r<k>.json``
(one record per job, written atomically when the job ends) and ``logs/<same>.jsonl`` (the run's
event log). A job whose record exists is done: an interrupted eval started again with the same
``--out`` runs only what is missing. Records from other settings in the same folder would make the
report compare unlike things, so that is refused with a clear message.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from keel.core.files import write_atomic
from keel.eval.cases import Case
from keel.eval.execute import JobOutput, JobSpec, pack_case, run_job

RUN_FILE = "run.json"


class SuiteError(ValueError):
    """The eval cannot start as asked (settings clash with the output folder, ray missing, …)."""


def plan_jobs(cases: Sequence[Case], template: JobSpec, repeat: int) -> list[JobSpec]:
    return [replace(template, case_id=c.id, case_dir=str(c.path), repeat=k)
            for c in cases for k in range(1, repeat + 1)]


def result_path(out: Path, key: str) -> Path:
    return out / "results" / f"{key}.json"


def finished_keys(out: Path) -> set[str]:
    """Jobs with a readable record; a half-written or corrupt file means the job runs again."""
    done: set[str] = set()
    for path in sorted((out / "results").glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(record, dict) and record.get("key") == path.stem:
            done.add(path.stem)
    return done


def check_settings(out: Path, jobs: Sequence[JobSpec]) -> None:
    """Record each agent's settings in run.json; refuse to mix different ones in one folder."""
    if not jobs:
        return
    path = out / RUN_FILE
    current: dict[str, Any] = {}
    if path.exists():
        try:
            current = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise SuiteError(f"{path}: unreadable ({exc}); choose another --out or remove it") from None
    agents = current.setdefault("agents", {})
    for wanted in {job.agent: job.settings() for job in jobs}.values():
        before = agents.get(wanted["agent"])
        if before is not None and before != wanted:
            diff = ", ".join(f"{k}: {before.get(k)!r} there, {v!r} now"
                             for k, v in wanted.items() if before.get(k) != v)
            raise SuiteError(f"{out} already holds {wanted['agent']} results with other settings ({diff}); "
                             "use another --out to keep runs comparable")
        agents[wanted["agent"]] = wanted
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(current, indent=2).encode("utf-8"), make_parents=True)


def write_output(out: Path, output: JobOutput) -> Path:
    key = output.record["key"]
    if output.log_text:
        write_atomic(out / "logs" / f"{key}.jsonl", output.log_text.encode("utf-8"), make_parents=True)
        output.record["log"] = f"logs/{key}.jsonl"
    path = result_path(out, key)
    write_atomic(path, json.dumps(output.record, indent=2, ensure_ascii=False).encode("utf-8"), make_parents=True)
    return path


def load_records(out: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((out / "results").glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(record, dict) and record.get("key") == path.stem:
            records.append(record)
    return records


# ---- backends ------------------------------------------------------------------------------------

OnDone = Callable[[JobOutput], None]


def run_local(jobs: Sequence[JobSpec], workers: int, on_done: OnDone) -> None:
    """A local process pool; each worker runs its job's agent as a further subprocess."""
    if not jobs:
        return
    # spawn: a forked child would inherit the progress bar's thread and any lock it holds
    pool = ProcessPoolExecutor(max_workers=max(1, workers), mp_context=get_context("spawn"),
                               initializer=_worker_signals)
    try:
        pending: set[Future[JobOutput]] = {pool.submit(_run_job_unless_stopping, job) for job in jobs}
        for output in _as_they_finish(pending):
            on_done(output)
    except BaseException:
        # Ctrl-C / SIGTERM: start nothing new (resume picks it up) and interrupt the running jobs,
        # whose agents are killed with their process groups. A terminal's Ctrl-C reaches the workers
        # already; a signal sent to this process alone must reach them too, or exit waits for them.
        workers_running = list((getattr(pool, "_processes", None) or {}).values())  # gone after shutdown
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers_running:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(worker.pid, signal.SIGTERM)
        raise
    pool.shutdown()


_stopping = False  # set in a worker once it was told to stop: jobs already queued to it are skipped


def _worker_signals() -> None:
    """In each pool worker: SIGTERM (from the eval) and SIGINT (a terminal's Ctrl-C) interrupt the
    running job — whose agent is then killed with its process group — and every job queued after it.
    Installed explicitly: a worker started from a background shell job inherits SIGINT ignored."""

    def stop(_signum: int, _frame: Any) -> None:
        global _stopping
        if _stopping:
            return  # once is enough: a second interrupt must not land inside the pool's own bookkeeping
        _stopping = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def _run_job_unless_stopping(job: JobSpec) -> JobOutput:
    if _stopping:
        raise KeyboardInterrupt
    return run_job(job)


def _as_they_finish(pending: set[Future[JobOutput]]) -> Iterator[JobOutput]:
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            yield future.result()


def run_ray(jobs: Sequence[JobSpec], address: str, on_done: OnDone, num_cpus: int | None = None) -> None:
    """Each job as a Ray task on an existing cluster (``auto``, ``ray://…``, ``host:port``) or,
    for ``local``, a Ray instance started here. Ray does the scheduling; the case folder travels
    inside the task so workers on other machines need keel installed but not the cases."""
    try:
        import ray
    except ImportError:
        raise SuiteError("--ray needs the ray package: pip install 'keel[ray]'") from None
    if not jobs:
        return
    started_here = not ray.is_initialized()
    if started_here:
        if address == "local":
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        else:
            try:
                ray.init(address=address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as e:   # no cluster there: a usage error
                why = (str(e).strip().splitlines() or [type(e).__name__])[0].rstrip(".")
                raise SuiteError(f"--ray {address}: no Ray cluster could be reached ({why}). Start one "
                                 "(`ray start --head`) or name it (--ray HOST:PORT, RAY_ADDRESS), or use "
                                 "--ray local to start one in this process") from None
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_job)
        archives = {job.case_dir: pack_case(Path(job.case_dir)) for job in jobs}
        refs = [remote.remote(replace(job, case_archive=archives[job.case_dir])) for job in jobs]
        while refs:
            done, refs = ray.wait(refs, num_returns=1)
            for ref in done:
                on_done(ray.get(ref))
    finally:
        if started_here:
            ray.shutdown()


def run_suite(jobs: Sequence[JobSpec], out: Path, *, workers: int = 1, ray_address: str | None = None,
              on_done: OnDone | None = None) -> list[JobSpec]:
    """Run the jobs without a record in ``out``; write each record as it lands. Returns what ran."""
    check_settings(out, jobs)
    done = finished_keys(out)
    todo = [job for job in jobs if job.key not in done]

    def landed(output: JobOutput) -> None:
        write_output(out, output)
        if on_done is not None:
            on_done(output)

    if ray_address:
        run_ray(todo, ray_address, landed, num_cpus=workers)
    else:
        run_local(todo, workers, landed)
    return todo
