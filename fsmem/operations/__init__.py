"""fsmem's operations: each one function over an open memory (`Core`), in the module of its concern.

`Memory`'s methods are these functions (`fsmem.memory`); the CLI, the agent
tools, MCP and the server reach them through it. Every write goes through one
transaction (`transaction`); queries are in `reads` and `search`, writes in
`writes`, history in `history`, and the upkeep of the memory (check, index,
consolidate, watch, context, stats, init) in `upkeep`.

A module here imports the layers below at its top only when they are cheap:
git machinery, the search index, consolidation and the watcher are imported
by the operation that uses them, so that a read starts no git and loads no
index (`tests/test_history.py`, `benchmarks/bench_startup.py`).
"""
