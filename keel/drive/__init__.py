"""Tools that drive a model or the gate: change_file (a focused rewrite request, then the checks) and
delegate (a sub-agent with its own runner).

They sit above keel.loop — delegate starts a Runner — and read the run they are called from through
``ToolContext.run`` (keel.tools.base.RunHandle, built by the runner), never through the Agent.
"""
