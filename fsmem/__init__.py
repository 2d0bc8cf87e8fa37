"""fsmem: one shared, durable memory for AI agents and the humans who run them.

The memory is a plain directory of Markdown files with YAML front matter;
`fsmem.Memory(root)` lists, greps, reads, searches and writes it within a
token budget.
"""

from fsmem.errors import FsmemError
from fsmem.memory import Memory

__version__ = "0.1.0"
__all__ = ["Memory", "FsmemError", "__version__"]
