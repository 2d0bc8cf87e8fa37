"""Hooks that agent hosts run on their own: they read an event, act on the memory, and never block the host."""
