"""Run mini-swe-agent once, in this process, with its default configuration (``mini.yaml``).

Started by ``keel.eval.peer`` as ``python -m keel.eval.peer_main`` with a JSON request on stdin,
so litellm's global state and mini-swe-agent's imports stay out of the eval's own processes. Only
what the comparison needs is changed from the defaults: the model (litellm ``openai/<model>`` at
the eval's base URL), temperature, step and wall-clock limits, no interactive confirmation, no cost
limit (a local model has no price), the workspace as the working directory and where the
trajectory is saved. Prints one JSON object: exit status and the trajectory path.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def main() -> int:
    request = json.loads(sys.stdin.read())
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
    from minisweagent.agents import get_agent
    from minisweagent.config import get_config_from_spec
    from minisweagent.environments import get_environment
    from minisweagent.models import get_model
    from minisweagent.utils.serialize import recursive_merge

    trajectory = Path(request["trajectory"])
    overrides: dict[str, Any] = {
        "agent": {"agent_class": "default", "step_limit": request["step_limit"], "cost_limit": 0,
                  "wall_time_limit_seconds": int(request["wall_time_limit_seconds"]), "output_path": trajectory},
        "model": {"model_name": f"openai/{request['model']}", "cost_tracking": "ignore_errors",
                  "model_kwargs": {"api_base": request["base_url"], "api_key": request.get("api_key") or "none",
                                   "temperature": request["temperature"]}},
        "environment": {"environment_class": "local", "cwd": request["cwd"]},
    }
    config = recursive_merge(get_config_from_spec("mini.yaml"), overrides)
    model = get_model(config=config.get("model", {}))
    env = get_environment(config.get("environment", {}), default_type="local")
    agent = get_agent(model, env, config.get("agent", {}), default_type="default")
    error = None
    try:
        info = agent.run(request["task"])
    except Exception as exc:  # the trajectory holds the traceback; the caller records the error
        info, error = {"exit_status": type(exc).__name__}, f"{type(exc).__name__}: {exc}"
    print(json.dumps({"exit_status": info.get("exit_status"), "error": error, "trajectory": str(trajectory),
                      "api_calls": getattr(agent, "n_calls", None), "cost": getattr(agent, "cost", None)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
