"""Extension points: plan mode, hooks, skills, MCP servers, project trust.

Each lives in its own module and reaches the loop the same way built-in tools do — as a ``Tool``
in the registry, behind the same approval gate, limits and event log — so an extension can never
do what a built-in tool may not.
"""
