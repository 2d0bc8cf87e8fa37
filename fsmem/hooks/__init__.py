"""Hooks that agent hosts run on their own: they read an event, act on the memory, and never block the host, but
for Claude Code's Stop hook asking once per session for keyed notes (`fsmem.hooks.asking`)."""
