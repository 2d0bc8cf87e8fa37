"""The two names a memory root holds besides its files, and where the root is, in a module that imports only os.

`fsmem.config` gives them to the rest of fsmem; `fsmem.store.rg_command` reads them from here so that a
plain grep can build rg's command line before any other part of fsmem is imported (`fsmem.cli.early`), and
the one-shot client finds the memory here before it asks a running watcher (`fsmem.cli.rendezvous`).
"""

import os

CONFIG_FILE = "fsmem.yaml"
STATE_DIR = ".fsmem"  # machine state: caches, logs, locks; never memory
ROOT_ENV = "FSMEM_ROOT"
MAX_DEPTH = 64  # folders a memory file may lie in (`fsmem.store.paths`); rg is given it too (`fsmem.store.rg_command`)


def find_root(given: str | None = None, start: str | None = None) -> str | None:
    """The memory a command opens: `given`, else $FSMEM_ROOT, else the nearest folder from `start` (the working
    folder) up that holds fsmem.yaml, as a real path; None where there is none (`discover_root` says why)."""
    chosen = given or os.environ.get(ROOT_ENV)
    if chosen:
        path = os.path.expanduser(chosen)
        return os.path.realpath(path) if os.path.isfile(os.path.join(path, CONFIG_FILE)) else None
    try:
        here = os.path.realpath(start or os.getcwd())
    except OSError:
        return None
    while True:
        if os.path.isfile(os.path.join(here, CONFIG_FILE)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
